"""``profplug ab`` round 2 on synthetic runs: the counterbalanced order and its recorded
positions, A/A labels, the position effect, the switched design's statistics, the reach
check and its exit status, old ab.json files still analyzed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from profplug.analyzers.ab import analyze_ab, parse_policies, schedule
from profplug.analyzers.ab.plan import policy_of, positions, switched_orders
from profplug.analyzers.ab.policy_reach import not_reached
from profplug.analyzers.ab.result import EXIT_NOT_REACHED
from profplug.analyzers.ab.switched import labelled_steps, log_ratio_ci, run_centers
from profplug.analyzers.render.registry import render_text

ROOT = Path(__file__).resolve().parents[3]
LABELS = ["device", "event"]


def test_counterbalanced_order_puts_every_policy_in_every_position_equally_often() -> None:
    assert schedule(LABELS, 4) == [(0, "device"), (0, "event"), (1, "event"), (1, "device"),
                                   (2, "device"), (2, "event"), (3, "event"), (3, "device")]
    three = schedule(["device", "event", "none"], 3)
    rounds = [[p for r, p in three if r == k] for k in range(3)]
    assert rounds == [["device", "event", "none"], ["event", "none", "device"],
                      ["none", "device", "event"]]  # a Latin square
    assert positions(three) == [0, 1, 2] * 3
    assert switched_orders(LABELS, 3) == [LABELS, ["event", "device"], LABELS]


def test_an_aa_check_names_the_same_policy_under_two_labels() -> None:
    assert parse_policies("device,device", ("device", "event", "none")) == ["device",
                                                                             "device2"]
    assert policy_of("device2") == "device" and policy_of("event") == "event"
    with pytest.raises(ValueError, match="twice"):
        parse_policies("event,event", ("device", "event", "none"))


def _run(k: int, rnd: int, label: str, step_us: list[float], pos: int = 0,
         counts: dict | None = None, **extra) -> dict:
    rank = {"rank": 0, "status": "finished", "clock": "host", "first_step": 20,
            "step_us": step_us}
    if counts is not None:
        rank["policy_counts"] = counts
    return {"index": k, "round": rnd, "policy": label, "status": "ok", "exit_status": 0,
            "reasons": [], "position": pos, "ranks": [rank], **extra}


def test_a_planted_position_effect_is_estimated_and_no_policy_difference_claimed() -> None:
    """A/A, 4 rounds, counterbalanced, the first run of every round exactly 30% slower and
    rounds at different host speeds: the position effect is +30% (to rounding), the
    policies are not told apart."""
    plan, runs = schedule(["device", "device2"], 4), []
    for k, ((rnd, label), pos) in enumerate(zip(plan, positions(plan), strict=True)):
        jitter = 1 + 0.01 * ((3 * k) % 5 - 2)  # -2%..+2%, fixed
        base = 1000.0 * (1 + 0.1 * rnd) * (1.3 if pos == 0 else 1.0) * jitter
        runs.append(_run(k, rnd, label, [base] * 10, pos))
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
    old = [_run(k, rnd, lb, [1000.0 * (1 + 0.1 * rnd) * (1.3 if lb == "device" else 1.0)
                             * (1 + 0.001 * k)] * 10, int(lb != "device"))
           for k, (rnd, lb) in enumerate(plan)]
    res = analyze_ab(old, policies=["device", "device2"], rounds=4, order="interleaved",
                     resamples=500)
    assert res.policy("device2").resolved is True  # wrong, and why the default changed
    assert "not separable" in res.position_effect["line"]


def _switched(k: int, order: list[str], speed: float, every: int = 10, n: int = 60,
              first: int = 20) -> dict:
    """Steps: device 1000 us x speed, event 900; the first 2 of each block 3x slower."""
    steps = []
    for i in range(first, first + n):
        label = order[(i // every) % len(order)]
        t = 1000.0 * speed * (0.9 if label == "event" else 1.0)
        steps.append(t * (3.0 if i % every < 2 else 1.0))
    run = _run(k, k, "+".join(order), steps, 0, block_order=order, switch_every=every)
    run["ranks"][0]["first_step"] = first
    return run


def test_switched_runs_compare_the_policies_inside_each_run() -> None:
    runs = [_switched(k, o, s) for k, (o, s) in enumerate(
        zip(switched_orders(LABELS, 3), (0.6, 1.4, 1.0), strict=True))]
    steps = labelled_steps(runs[1])
    assert [lb for _, lb, _ in steps[:11]] == ["event"] * 10 + ["device"]
    assert run_centers(runs[1]) == {"event": (1260.0, 24), "device": (1400.0, 24)}
    res = analyze_ab(runs, policies=LABELS, rounds=3, resamples=500)
    ev = res.policy("event")
    assert res.design == "switched" and res.switch_every == 10
    assert ev.round_medians_us == [540.0, 1260.0, 900.0]
    assert ev.speedup_vs_device == pytest.approx(1 / 0.9, abs=1e-4)
    assert ev.resolved and ev.verdict.startswith("event: 1.11x faster than device")
    assert "3 switched runs" in ev.verdict and "switched every 10 steps" in res.verdict
    assert res.after_switch["event"][:3] == [3.0, 3.0, 1.0]  # the transient, measured
    doc = json.loads(render_text(res, "json"))
    assert doc["design"] == "switched" and doc["discard_after_switch"] == 2


def test_the_t_interval_over_runs_log_ratios() -> None:
    sp, lo, hi, n = log_ratio_ci([1.1, 1.2, 1.15])
    r = [math.log(x) for x in (1.1, 1.2, 1.15)]
    m = sum(r) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in r) / 2)
    assert n == 3 and sp == pytest.approx(math.exp(m))
    assert lo == pytest.approx(math.exp(m - 4.303 * sd / math.sqrt(3)))
    assert hi == pytest.approx(math.exp(m + 4.303 * sd / math.sqrt(3)))
    assert log_ratio_ci([1.1, 1.2])[1:3] == (None, None)


def _counts(**policies: int) -> dict:
    return {p: {"p2p_calls": 0, "device_syncs": 0, "event_waits": 0,
                "current_policy_calls": policies.get(p, 0)}
            for p in ("device", "event", "none")}


def test_a_policy_that_reached_nothing_is_one_loud_line_and_exit_7() -> None:
    runs = [_run(k, rnd, lb, [1000.0] * 5, pos, _counts(device=5))
            for k, ((rnd, lb), pos) in enumerate(zip(schedule(LABELS, 3),
                                                     positions(schedule(LABELS, 3)),
                                                     strict=True))]
    res = analyze_ab(runs, policies=LABELS, rounds=3, resamples=200)
    assert res.not_reached[0] == (
        "POLICY NOT REACHED: run 1 (round 0, event): the event policy reached nothing in "
        "the job: no patched send/recv call (profplug.p2p or Megatron-Core's), no device "
        "sync or event wait issued, no profplug.current_policy() call")
    assert len(res.not_reached) == 3 and res.exit_code() == EXIT_NOT_REACHED == 7
    assert res.verdict.startswith("POLICY NOT REACHED: run 1")
    # old records (no counts) are not checked
    assert not_reached([{k: v for k, v in r.items() if k != "ranks"} | {"ranks": [{}]}
                        for r in runs]) == []


@pytest.mark.parametrize("path", sorted(
    [*ROOT.glob("sample_traces/ab_*/ab.json"),
     *ROOT.glob("benchmarks/whatif_grid_data/ab/*/ab.json")]), ids=lambda p: p.parent.name)
def test_old_ab_json_files_still_analyze(path) -> None:
    doc = json.loads(path.read_text())
    res = analyze_ab(doc["runs"], policies=doc["policies"], rounds=doc["rounds"],
                     order=doc.get("order") or "interleaved", resamples=200)
    assert res.design == "separate" and res.not_reached == []
    assert [s.policy for s in res.summary] == doc["policies"]


def test_a_switched_mismatch_names_the_policy_that_ran_the_step_in_each_run() -> None:
    runs = [_switched(k, o, 1.0) for k, o in enumerate(switched_orders(LABELS, 2))]
    for r in runs:
        r["ranks"][0] |= {"digest_calls": 20, "step_digests": [f"s{i}" for i in range(20)]}
    runs[1]["ranks"][0]["step_digests"][7] = "bad"  # step 7: block 0, event in run 1
    res = analyze_ab(runs, policies=LABELS, rounds=2, resamples=100)
    (m,) = res.outputs.mismatches
    assert (m.run, m.step, m.policy, m.reference_policy) == (1, 7, "event", "device")
    assert res.exit_code() == 1
