"""The A/B statistics on synthetic data of known spread: medians, the coverage of the
bootstrap CIs over rounds, pairing by round, the rounds-needed estimate, and the position
effect (the first run of a round slower) told apart from a policy effect."""

from __future__ import annotations

import math

import numpy as np
import pytest
from profplug.analyzers.ab import analyze_ab, schedule, stats
from profplug.analyzers.ab.plan import positions
from synth import ab_run

B = 2000  # resamples in the coverage loops (the product uses 10,000)


def test_pipeline_step_is_the_slowest_rank_per_step() -> None:
    got = stats.pipeline_steps([[1, 5, 3, 9], [2, 4, 4]])
    assert got.tolist() == [2, 5, 4]  # truncated to the shortest window
    assert stats.run_median([[1, 5, 3], [2, 4, 4]]) == 4.0
    assert stats.run_median([[], []]) is None


def test_median_ci_is_reproducible_and_brackets_the_median() -> None:
    v = [10.0, 12.0, 11.0, 30.0, 9.0]
    med, lo, hi = stats.median_ci(v)
    assert med == 11.0 and lo <= med <= hi
    assert stats.median_ci(v) == (med, lo, hi)  # seeded
    assert stats.median_ci([7.0]) == (7.0, None, None)  # fewer than 3 rounds: no CI
    assert stats.median_ci([7.0, 9.0]) == (8.0, None, None)
    with pytest.raises(ValueError):
        stats.median_ci([])


@pytest.mark.parametrize("rounds", [5, 8, 15])
def test_ci_of_the_median_covers_the_truth_about_95_percent(rounds) -> None:
    """Rounds whose medians scatter around a known center: the CI contains it in ~95% of
    400 simulated experiments (the percentile bootstrap of a median of 5 is [min, max]:
    1 - 2/32 = 93.75% exactly)."""
    rng = np.random.default_rng(rounds)
    hits = 0
    n = 400
    for i in range(n):
        v = 1000.0 + rng.normal(0, 50, rounds)
        _, lo, hi = stats.median_ci(v, resamples=B, seed=i)
        hits += lo <= 1000.0 <= hi
    assert 0.89 <= hits / n <= 0.99, hits / n


def _experiment(rng: np.random.Generator, rounds: int, ratio: float, drift: float,
                noise: float, steps: int = 40) -> list[dict]:
    """Interleaved runs: device at 2000 us, event at 2000/ratio; each round shares a drift
    (the machine's state), each run has its own offset and per-step noise."""
    runs, k = [], 0
    for r in range(rounds):
        d = rng.normal(0, drift)
        for policy, mu in (("device", 2000.0), ("event", 2000.0 / ratio)):
            level = mu * math.exp(d + rng.normal(0, noise))
            ranks = [{"rank": q, "step_us": (level + rng.normal(0, 0.02 * level, steps)).tolist(),
                      "host_step_us": [], "step_digests": [], "digest_calls": 0}
                     for q in range(2)]
            runs.append({"index": k, "round": r, "policy": policy, "status": "ok",
                         "exit_status": 0, "ranks": ranks})
            k += 1
    return runs


def test_speedup_ci_covers_the_true_ratio_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    hits, n = 0, 200
    for _ in range(n):
        res = analyze_ab(_experiment(rng, 8, 2.0, drift=0.2, noise=0.03),
                         policies=["device", "event"], rounds=8, resamples=B)
        lo, hi = res.policy("event").speedup_ci95
        hits += lo <= 2.0 <= hi
    assert 0.88 <= hits / n <= 1.0, hits / n


def test_pairing_by_round_cancels_drift() -> None:
    """Large drift between rounds, small noise within: the paired CI is much narrower than
    an unpaired one on the same values."""
    rng = np.random.default_rng(3)
    runs = _experiment(rng, 10, 1.5, drift=0.3, noise=0.01)
    res = analyze_ab(runs, policies=["device", "event"], rounds=10, resamples=B)
    ev = res.policy("event")
    assert ev.paired and ev.resolved and ev.speedup_rounds == 10
    base = res.policy("device").round_medians_us
    other = ev.round_medians_us
    rng2 = np.random.default_rng(0)
    ib = rng2.integers(0, 10, (B, 10))
    io = rng2.integers(0, 10, (B, 10))
    unpaired = np.median(np.array(base)[ib], 1) / np.median(np.array(other)[io], 1)
    u_lo, u_hi = np.percentile(unpaired, [2.5, 97.5])
    p_lo, p_hi = ev.speedup_ci95
    assert (p_hi - p_lo) < 0.5 * (u_hi - u_lo)
    assert p_lo <= 1.5 <= p_hi


def test_no_difference_is_not_resolved_and_says_how_many_rounds() -> None:
    rng = np.random.default_rng(11)
    res = analyze_ab(_experiment(rng, 5, 1.02, drift=0.0, noise=0.05),
                     policies=["device", "event"], rounds=5)
    ev = res.policy("event")
    assert ev.speedup_ci95[0] <= 1.0 <= ev.speedup_ci95[1]
    assert not ev.resolved and ev.rounds_needed > 5
    assert "no difference from device resolved at this noise" in ev.verdict
    assert "rounds needed" in ev.verdict


def test_rounds_needed_follows_t_over_sqrt_n() -> None:
    # speedup 1.05, CI half-width in log space twice |log 1.05|: at 5 rounds the implied
    # spread is 2 * sqrt(5) / t(4) = 1.611 |log s|; t(n-1)/sqrt(n) < 1/1.611 first at n = 13
    s = 1.05
    half = 2 * math.log(s)
    lo, hi = s / math.exp(half), s * math.exp(half)
    assert stats.rounds_needed(s, lo, hi, 5) == 13
    # with many rounds t is ~normal and the square law holds: 4x the rounds
    assert 380 <= (stats.rounds_needed(s, lo, hi, 100) or 0) <= 400
    assert stats.rounds_needed(1.0, 0.9, 1.1, 5) is None
    assert stats.rounds_needed(1.0001, 0.5, 2.0, 5) == stats.MAX_ROUNDS_NEEDED
    assert not stats.resolved(0.98, 1.03) and stats.resolved(1.01, 1.2)


def test_fewer_than_three_paired_rounds_give_the_ratio_and_no_ci() -> None:
    s, lo, hi, n = stats.speedup_ci([100.0, None, 110.0, 120.0], [50.0, 50.0, None, 60.0],
                                    resamples=B)
    assert (lo, hi, n) == (None, None, 2) and s == pytest.approx(110.0 / 55.0)
    assert stats.speedup_ci([100.0], [50.0]) == (2.0, None, None, 1)
    assert stats.speedup_ci([100.0, None], [None, 50.0]) == (2.0, None, None, 0)
    s, lo, hi, n = stats.speedup_ci([100.0, 104.0, 98.0], [50.0, 51.0, 49.0], resamples=B)
    assert n == 3 and lo is not None and hi is not None and lo <= s <= hi


def test_t_quantile_matches_the_table_and_the_normal_limit() -> None:
    assert stats.t_quantile(2) == 4.303 and stats.t_quantile(4) == 2.776
    assert abs(stats.t_quantile(31) - 2.040) < 0.003  # Cornish-Fisher past the table
    assert abs(stats.t_quantile(10_000) - 1.960) < 0.001


def test_an_a_a_check_from_the_h200_is_not_resolved() -> None:
    """Megatron-Core at PP=1 on one H200 (sample_traces/ab_h200_megatron_pp1): the policies run
    the same code; the paired bootstrap alone said 0.951-0.989 (a false "2% slower"), the t
    interval on the log ratios 0.946-1.003; the CI is the wider of the two."""
    device = [6062.24, 6287.856, 5911.072, 6278.672]
    event = [6128.72, 6368.016, 6213.856, 6485.952]
    s, lo, hi, n = stats.speedup_ci(device, event)
    assert n == 4 and lo is not None and hi is not None
    assert lo <= 0.947 and 1.0 <= hi and not stats.resolved(lo, hi)
    assert 0.95 < s < 1.0


def test_a_clear_speedup_stays_resolved_with_the_t_interval() -> None:
    """The decode loop's 5 rounds on one H200 (sample_traces/ab_h200_decode_loop)."""
    device = [473.072, 498.48, 481.808, 498.544, 502.464]
    event = [465.28, 451.856, 463.808, 453.712, 461.04]
    s, lo, hi, _ = stats.speedup_ci(device, event)
    assert lo is not None and hi is not None and stats.resolved(lo, hi)
    assert lo <= 1.022 and hi >= 1.10 and abs(s - 498.48 / 461.04) < 1e-9


def test_a_planted_position_effect_is_estimated_and_no_policy_difference_claimed() -> None:
    """A/A, 4 rounds, counterbalanced, the first run of every round exactly 30% slower and
    rounds at different host speeds: the position effect is +30% (to rounding), the
    policies are not told apart."""
    plan, runs = schedule(["device", "device2"], 4), []
    for k, ((rnd, label), pos) in enumerate(zip(plan, positions(plan), strict=True)):
        jitter = 1 + 0.01 * ((3 * k) % 5 - 2)  # -2%..+2%, fixed
        base = 1000.0 * (1 + 0.1 * rnd) * (1.3 if pos == 0 else 1.0) * jitter
        runs.append(ab_run(k, rnd, label, [base] * 10, pos))
    res = analyze_ab(runs, policies=["device", "device2"], rounds=4, resamples=500)
    pe = res.position_effect
    assert pe is not None and pe["rounds"] == 4 and abs(pe["first_run_pct"] - 30.0) < 2.0
    lo, hi = pe["ci95_pct"]
    assert pe["resolved"] and 0.0 < lo < 30.0 < hi
    assert pe["line"] == (f"first run of a round: {pe['first_run_pct']:+.1f}% (95% CI "
                          f"{lo:+.1f}..{hi:+.1f}%, 4 rounds)")
    assert res.policy("device2").resolved is False
    # the old default (device always first) turns the same effect into a policy effect
    plan = schedule(["device", "device2"], 4, "interleaved")
    old = [ab_run(k, rnd, lb, [1000.0 * (1 + 0.1 * rnd) * (1.3 if lb == "device" else 1.0)
                             * (1 + 0.001 * k)] * 10, int(lb != "device"))
           for k, (rnd, lb) in enumerate(plan)]
    res = analyze_ab(old, policies=["device", "device2"], rounds=4, order="interleaved",
                     resamples=500)
    assert res.policy("device2").resolved is True  # wrong, and why the default changed
    assert "not separable" in res.position_effect["line"]
