"""From run records to an A/B result: failed runs, the output check, the verdicts, the exit
codes (a policy that reached nothing among them), ab.json's schema and the what-if overlay
(synthetic runs; the run order is test_ab_plan.py's)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from profplug.analyzers.ab import analyze_ab, schedule
from profplug.analyzers.ab.overlay import attach, overlay, whatif_overlay
from profplug.analyzers.ab.plan import positions
from profplug.analyzers.ab.policy_reach import not_reached
from profplug.analyzers.ab.result import EXIT_NOT_REACHED
from profplug.analyzers.render.registry import render_text
from synth import AB_POLICIES, ab_result, ab_run, ab_runs

ROOT = Path(__file__).resolve().parents[4]


def test_all_ok_gives_speedups_verdicts_and_exit_0() -> None:
    res = ab_result(ab_runs())
    assert res.exit_code() == 0 and res.outputs_identical is True
    dev, ev = res.policy("device"), res.policy("event")
    assert dev.median_step_us == pytest.approx(2030.0, abs=15)  # slowest rank, per step
    assert ev.speedup_vs_device == pytest.approx(2.0, rel=0.01) and ev.paired
    assert ev.verdict == "event: 1.99x faster than device (95% CI 1.99-1.99x, 3 rounds)"
    assert "3 rounds" in ev.verdict and res.clock == "cuda_event"
    assert res.runs[0]["median_step_us"] == pytest.approx(2012.0)


def test_a_planted_policy_dependent_result_is_a_loud_mismatch() -> None:
    changed = [f"1-{i}" for i in range(22)]
    changed[7] = "planted"  # run 4 (round 1, event), rank 1, step 7
    res = ab_result(ab_runs(digests={(4, 1): changed}))
    assert res.outputs_identical is False and res.exit_code() == 1
    (m,) = res.outputs.mismatches
    assert (m.run, m.round, m.policy, m.step, m.rank) == (4, 1, "event", 7, 1)
    assert (m.expected, m.got, m.reference_run) == ("1-7", "planted", 0)
    assert res.verdict.startswith("OUTPUTS DIFFER: run 4 (round 1, event) differs from run 0 "
                                  "(round 0, device) first at step 7 on rank 1")
    table = render_text(res, "table")
    assert "outputs: DIFFER in 1 of 9 runs" in table


def test_the_first_differing_step_wins_over_the_lower_rank() -> None:
    r0 = [f"0-{i}" for i in range(22)]
    r1 = [f"1-{i}" for i in range(22)]
    r0[9], r1[3] = "x", "y"
    (m,) = ab_result(ab_runs(digests={(2, 0): r0, (2, 1): r1})).outputs.mismatches
    assert (m.step, m.rank) == (3, 1)


def test_a_failed_round_is_kept_out_of_the_statistics_and_the_exit_status_says_so() -> None:
    res = ab_result(ab_runs(rounds=4, failed={4}), rounds=4)
    ev = res.policy("event")
    assert ev.rounds_ok == 3 and ev.round_medians_us[1] is None
    assert ev.speedup_rounds == 3 and ev.paired and ev.speedup_ci95 is not None
    assert res.exit_code() == 5 and res.outputs.compared_runs == 11
    assert [r["index"] for r in res.failed_runs] == [4]
    assert "failed: run 4 (round 1, event): rank 1: exception" in render_text(res, "table")


def test_a_policy_without_any_successful_run_has_no_result() -> None:
    res = ab_result(ab_runs(failed={1, 4, 7}))
    assert res.exit_code() == 6 and res.policy("event").median_step_us is None
    assert res.policy("event").verdict == ("event: no result (event has no successful run "
                                           "with step times)")
    assert res.policy("none").resolved


def test_without_digests_outputs_are_not_checked() -> None:
    runs = ab_runs()
    for r in runs:
        for k in r["ranks"]:
            k["digest_calls"], k["step_digests"] = 0, []
    res = ab_result(runs)
    assert res.outputs_identical is None and res.exit_code() == 0
    assert "not checked" in render_text(res, "table")


def test_one_round_has_no_ci() -> None:
    res = ab_result(ab_runs(rounds=1), rounds=1)
    ev = res.policy("event")
    assert ev.verdict == ("event: too few rounds for a confidence interval (1; at least 3), "
                          "no verdict (measured 1.99x the speed of device over 1 round)")
    assert ev.ci95_us is None and ev.speedup_ci95 is None and ev.resolved is None
    assert any("1 successful round: too few rounds" in w for w in res.warnings)


def test_two_rounds_give_no_ci_and_no_verdict() -> None:
    """A percentile bootstrap over 2 rounds is their range: not a CI to base a verdict on."""
    res = ab_result(ab_runs(rounds=2), rounds=2)
    for p in ("device", "event", "none"):
        s = res.policy(p)
        assert s.median_step_us is not None and s.ci95_us is None and s.host_ci95_us is None
        assert all(k.ci95_us is None for k in s.ranks)
    ev = res.policy("event")
    assert (ev.speedup_rounds, ev.speedup_ci95, ev.resolved, ev.rounds_needed) == (
        2, None, None, None)
    assert ev.verdict.startswith("event: too few rounds for a confidence interval (2; at "
                                 "least 3), no verdict")
    assert "faster" not in res.verdict and "CI" not in res.verdict
    doc = json.loads(render_text(res, "json"))
    assert doc["summary"]["event"]["speedup_ci95"] is None
    assert doc["summary"]["device"]["ci95_us"] is None
    table = render_text(res, "table")
    assert "too few rounds for a confidence interval (2; at least 3)" in " ".join(table.split())


def test_three_rounds_with_one_failed_pair_give_no_speedup_ci() -> None:
    res = ab_result(ab_runs(rounds=3, failed={4}))  # round 1's event run failed
    ev = res.policy("event")
    assert ev.rounds_ok == 2 and ev.ci95_us is None and ev.speedup_rounds == 2
    assert ev.speedup_ci95 is None and "no verdict" in ev.verdict
    assert res.policy("none").speedup_ci95 is not None  # none has its 3 pairs


def test_a_slower_policy_is_called_slower() -> None:
    runs = ab_runs(policies=["device", "event"])
    for r in runs:
        if r["policy"] == "event":
            for k in r["ranks"]:
                k["step_us"] = [x * 2.2 for x in k["step_us"]]
    ev = ab_result(runs, policies=["device", "event"]).policy("event")
    assert ev.verdict.startswith("event: 1.1") and "x slower than device" in ev.verdict


def test_ab_json_schema() -> None:
    res = ab_result(ab_runs(), order="random", seed=42)
    doc = json.loads(render_text(res, "json"))
    assert doc["version"] == 1 and doc["policies"] == AB_POLICIES
    assert (doc["order"], doc["seed"], doc["rounds"]) == ("random", 42, 3)
    run = doc["runs"][0]
    assert {"index", "round", "policy", "status", "exit_status", "ranks",
            "median_step_us"} <= set(run)
    assert {"rank", "step_us", "host_step_us", "digest", "step_digests",
            "median_step_us"} <= set(run["ranks"][0])
    assert set(doc["summary"]) == set(AB_POLICIES)
    dev, ev = doc["summary"]["device"], doc["summary"]["event"]
    assert {"median_step_us", "ci95_us", "rounds_ok"} <= set(dev)
    assert "speedup_vs_device" not in dev
    assert {"speedup_vs_device", "speedup_ci95", "paired", "resolved"} <= set(ev)
    assert len(ev["ci95_us"]) == 2 and len(ev["speedup_ci95"]) == 2
    assert doc["outputs_identical"] is True and doc["verdict"].startswith("event: ")
    assert doc["exit_status"] == 0 and doc["verdicts"]["none"].startswith("none: ")


def test_the_whatif_prediction_against_the_measured_event_runs() -> None:
    res = ab_result(ab_runs())
    wi = SimpleNamespace(drop="device-sync", max_model_error_pct=0.4, warnings=[], ranks=[
        SimpleNamespace(rank=0, basis="step", recorded_us=2400.0, replayed_us=2400.0,
                        predicted_us=1005.0, direct_us=90.0, dropped_calls=20,
                        error_band_pct=8.0, run_band_pct=20.0),
        SimpleNamespace(rank=1, basis="step", recorded_us=2410.0, replayed_us=2410.0,
                        predicted_us=1015.0, direct_us=80.0, dropped_calls=20,
                        error_band_pct=9.0, run_band_pct=21.0)], calibrated_on_us=None)
    attach(res, overlay(wi, "runs/traced"))
    ov = res.whatif
    assert ov["predicted_step_us"] == 1015.0 and ov["recorded_step_us"] == 2410.0
    # the slowest predicted rank's band for a separate traced run (a traced what-if's own)
    assert ov["predicted_rank"] == 1 and ov["band_for"] == "a separate traced run"
    assert ov["band_pct"] == 21.0 and ov["predicted_band_us"] == [801.85, 1228.15]
    assert ov["measured_policy"] == "event" and ov["prediction_in_ci"] is True
    assert ov["band_overlaps_ci"] is True
    assert ov["predicted_speedup"] == pytest.approx(2410 / 1015, abs=1e-4)
    assert ov["profiler_overhead_pct"] > 0
    table = render_text(res, "table")
    assert "what-if (runs/traced, traced device run, at the traced host speed): predicted" in (
        " ".join(table.split()))
    assert json.loads(render_text(res, "json"))["whatif"]["prediction_in_ci"] is True


def test_whatif_on_a_sample_run_is_calibrated_on_the_unprofiled_device_step() -> None:
    """The shipped 2-GPU decode trace (device policy) against the unprofiled device step
    measured on that machine (5,783 us, sample_traces/README.md)."""
    run = ROOT / "sample_traces" / "pp2_infer_kineto" / "device"
    if not run.is_dir():
        pytest.skip("no sample traces in this checkout")
    ov = whatif_overlay([run], "pp2", 5783.0)
    assert ov["calibrated_on_us"] == 5783.0 and ov["basis"] == "step"
    assert ov["traced"]["recorded_step_us"] == ov["recorded_step_us"] > 5783.0
    assert ov["predicted_step_us"] < ov["traced"]["predicted_step_us"]  # a faster host
    assert ov["predicted_speedup"] == pytest.approx(5783.0 / ov["predicted_step_us"], rel=1e-3)
    assert all(r["recorded_us"] == 5783.0 for r in ov["ranks"])


def test_the_whatif_against_two_rounds_has_no_ci_to_be_inside() -> None:
    res = ab_result(ab_runs(rounds=2), rounds=2)
    attach(res, {"run": "runs/traced", "predicted_step_us": 1000.0, "recorded_step_us": 2400.0,
                 "band_pct": 5.0, "predicted_speedup": 2.4})
    ov = res.whatif
    assert ov["measured_ci95_us"] is None and "prediction_in_ci" not in ov
    assert ov["prediction_error_pct"] == -1.67  # 1,017 us measured (2 rounds)
    assert ("measured event 1,017.0 (too few rounds for a confidence interval (2; at least "
            "3)): -1.7%") in " ".join(render_text(res, "table").split())


def _counts(**policies: int) -> dict:
    return {p: {"p2p_calls": 0, "device_syncs": 0, "event_waits": 0,
                "current_policy_calls": policies.get(p, 0)}
            for p in ("device", "event", "none")}


def test_a_policy_that_reached_nothing_is_one_loud_line_and_exit_7() -> None:
    labels = ["device", "event"]
    plan = schedule(labels, 3)
    runs = [ab_run(k, rnd, lb, [1000.0] * 5, pos, _counts(device=5))
            for k, ((rnd, lb), pos) in enumerate(zip(plan, positions(plan), strict=True))]
    res = analyze_ab(runs, policies=labels, rounds=3, resamples=200)
    assert res.not_reached[0] == (
        "POLICY NOT REACHED: run 1 (round 0, event): the event policy reached nothing in "
        "the job: no sync site called (profplug.p2p, Megatron-Core's, transformers' or a "
        "--sync-site), no device sync or event wait issued, no profplug.current_policy() call")
    assert len(res.not_reached) == 3 and res.exit_code() == EXIT_NOT_REACHED == 7
    assert res.verdict.startswith("POLICY NOT REACHED: run 1")
    # old records (no counts) are not checked
    assert not_reached([{k: v for k, v in r.items() if k != "ranks"} | {"ranks": [{}]}
                        for r in runs]) == []
