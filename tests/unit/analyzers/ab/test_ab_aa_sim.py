"""``benchmarks/sim_ab_aa.py``: the verdict's false-positive rate on synthetic A/A experiments
(per-process host speed in 0.6-1.4x, the first run of a round 30% slower, step noise and
drift), seeded and small: 200 experiments per design through the real analysis."""

from __future__ import annotations

from pathlib import Path

import sim_ab_aa

ROOT = Path(__file__).resolve().parents[4]


def test_the_default_designs_false_positive_rate_is_at_most_5_percent() -> None:
    k, n = sim_ab_aa.false_positive_rate("counterbalanced", 200, rounds=5, steps=40, every=5,
                                   seed=1, resamples=500)
    assert n == 200 and k / n <= 0.05
    # switched: t over the runs' log ratios is exact for normal log ratios, so its rate is
    # the nominal 5% up to sampling: its 95% binomial interval must reach down to 5%
    k, n = sim_ab_aa.false_positive_rate("switched", 200, rounds=5, steps=40, every=5, seed=1,
                                   resamples=500)
    assert sim_ab_aa.wilson(k, n)[0] <= 0.05 and k / n < 0.08


def test_the_old_interleaved_order_turns_the_position_effect_into_a_policy_effect() -> None:
    k, n = sim_ab_aa.false_positive_rate("interleaved", 100, rounds=5, steps=40, every=5, seed=1,
                                   resamples=500)
    assert k / n > 0.15


def test_the_switched_design_finds_a_real_10_percent_difference() -> None:
    """Power, so that the false-positive test cannot pass by never resolving anything."""
    import numpy as np
    from profplug.analyzers.ab import analyze_ab

    rng = np.random.default_rng(2)
    found = 0
    for _ in range(50):
        runs = sim_ab_aa.experiment("switched", rng, 3, 40, 5, 0.3, 0.03, 0.05)
        for r in runs:  # the second label 10% faster in its blocks
            t = r["ranks"][0]["step_us"]
            order, first = r["block_order"], r["ranks"][0]["first_step"]
            r["ranks"][0]["step_us"] = [x / 1.1 if order[((first + i) // 5) % 2] == "device2"
                                        else x for i, x in enumerate(t)]
        res = analyze_ab(runs, policies=sim_ab_aa.LABELS, rounds=3, resamples=200)
        found += bool(res.policy("device2").resolved)
    assert found >= 45


def test_separate_runs_rarely_resolve_a_real_10_percent_difference() -> None:
    """What switching inside runs is for (the power test above): with each process's host
    speed drawn in 0.6-1.4x, 3 rounds of separate runs leave the same real 10% unresolved
    in most experiments (no position effect here: the host draws alone)."""
    import numpy as np
    from profplug.analyzers.ab import analyze_ab

    rng = np.random.default_rng(2)
    found = 0
    for _ in range(50):
        runs = sim_ab_aa.experiment("counterbalanced", rng, 3, 40, 5, 0.0, 0.03, 0.05)
        for r in runs:  # the second label's runs 10% faster
            if r["policy"] == "device2":
                r["ranks"][0]["step_us"] = [x / 1.1 for x in r["ranks"][0]["step_us"]]
        res = analyze_ab(runs, policies=sim_ab_aa.LABELS, rounds=3, resamples=200)
        found += bool(res.policy("device2").resolved)
    assert found <= 10
