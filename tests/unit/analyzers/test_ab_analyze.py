"""From run records to an A/B result: the run order, failed runs, the output check, the
verdicts, the exit codes, ab.json's schema and the what-if overlay (synthetic runs)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from profplug.analyzers.ab import analyze_ab, parse_policies, schedule
from profplug.analyzers.ab.overlay import attach, overlay, whatif_overlay
from profplug.analyzers.render.registry import render_text

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ["device", "event", "none"]
MEANS = {"device": 2000.0, "event": 1000.0, "none": 990.0}


def test_interleaved_order_runs_every_policy_once_per_round_in_the_given_order() -> None:
    assert schedule(["device", "event"], 3, "interleaved") == [
        (0, "device"), (0, "event"), (1, "device"), (1, "event"), (2, "device"), (2, "event")]


def test_random_order_is_shuffled_per_round_and_reproducible_from_its_seed() -> None:
    plan = schedule(POLICIES, 20, "random", seed=5)
    assert plan == schedule(POLICIES, 20, "random", seed=5)
    assert [r for r, _ in plan] == [r for r in range(20) for _ in POLICIES]
    rounds = [tuple(p for r, p in plan if r == k) for k in range(20)]
    assert all(sorted(x) == sorted(POLICIES) for x in rounds)
    assert len(set(rounds)) > 1  # not always the same order
    with pytest.raises(ValueError):
        schedule(POLICIES, 2, "alphabetical")


@pytest.mark.parametrize("text, error", [
    ("event,none", "baseline"), ("device", "baseline"), ("device,fast", "unknown policy"),
    ("device,event,event", "twice")])
def test_policies_must_name_device_and_another(text, error) -> None:
    with pytest.raises(ValueError, match=error):
        parse_policies(text, ("device", "event", "none"))
    assert parse_policies(" Device, event ", ("device", "event", "none")) == ["device", "event"]


def make_runs(rounds: int = 3, policies=POLICIES, digests=None, failed=(),
              steps: int = 20) -> list[dict]:
    """Runs with step times at MEANS (+ a little per round) and the same digests, unless
    ``digests[(run, rank)]`` replaces a rank's step digests; runs in ``failed`` failed."""
    runs, k = [], 0
    for r in range(rounds):
        for p in policies:
            ranks = []
            for q in range(2):
                base = MEANS[p] * (1 + 0.01 * r) + 10 * q
                times = [base + (i % 5) for i in range(steps)]
                ranks.append({"rank": q, "status": "finished", "clock": "cuda_event",
                              "requested_steps": steps, "step_us": times,
                              "host_step_us": [x + 3 for x in times],
                              "digest": "d", "digest_calls": 22,
                              "step_digests": (digests or {}).get((k, q),
                                                                  [f"{q}-{i}" for i in range(22)])})
            bad = k in failed
            runs.append({"index": k, "round": r, "policy": p,
                         "status": "failed" if bad else "ok", "exit_status": 1 if bad else 0,
                         "reasons": ["rank 1: exception: RuntimeError: boom"] if bad else [],
                         "ranks": ranks})
            k += 1
    return runs


def analyze(runs, rounds=3, policies=POLICIES, **kw):
    return analyze_ab(runs, policies=policies, rounds=rounds, skip=2, steps=20,
                      command=["torchrun", "job.py"], **kw)


def test_all_ok_gives_speedups_verdicts_and_exit_0() -> None:
    res = analyze(make_runs())
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
    res = analyze(make_runs(digests={(4, 1): changed}))
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
    (m,) = analyze(make_runs(digests={(2, 0): r0, (2, 1): r1})).outputs.mismatches
    assert (m.step, m.rank) == (3, 1)


def test_a_failed_round_is_kept_out_of_the_statistics_and_the_exit_status_says_so() -> None:
    res = analyze(make_runs(rounds=4, failed={4}), rounds=4)
    ev = res.policy("event")
    assert ev.rounds_ok == 3 and ev.round_medians_us[1] is None
    assert ev.speedup_rounds == 3 and ev.paired and ev.speedup_ci95 is not None
    assert res.exit_code() == 5 and res.outputs.compared_runs == 11
    assert [r["index"] for r in res.failed_runs] == [4]
    assert "failed: run 4 (round 1, event): rank 1: exception" in render_text(res, "table")


def test_a_policy_without_any_successful_run_has_no_result() -> None:
    res = analyze(make_runs(failed={1, 4, 7}))
    assert res.exit_code() == 6 and res.policy("event").median_step_us is None
    assert res.policy("event").verdict == ("event: no result (event has no successful run "
                                           "with step times)")
    assert res.policy("none").resolved


def test_without_digests_outputs_are_not_checked() -> None:
    runs = make_runs()
    for r in runs:
        for k in r["ranks"]:
            k["digest_calls"], k["step_digests"] = 0, []
    res = analyze(runs)
    assert res.outputs_identical is None and res.exit_code() == 0
    assert "not checked" in render_text(res, "table")


def test_one_round_has_no_ci() -> None:
    res = analyze(make_runs(rounds=1), rounds=1)
    ev = res.policy("event")
    assert ev.verdict == ("event: too few rounds for a confidence interval (1; at least 3), "
                          "no verdict (measured 1.99x the speed of device over 1 round)")
    assert ev.ci95_us is None and ev.speedup_ci95 is None and ev.resolved is None
    assert any("1 successful round: too few rounds" in w for w in res.warnings)


def test_two_rounds_give_no_ci_and_no_verdict() -> None:
    """A percentile bootstrap over 2 rounds is their range: not a CI to base a verdict on."""
    res = analyze(make_runs(rounds=2), rounds=2)
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
    res = analyze(make_runs(rounds=3, failed={4}))  # round 1's event run failed
    ev = res.policy("event")
    assert ev.rounds_ok == 2 and ev.ci95_us is None and ev.speedup_rounds == 2
    assert ev.speedup_ci95 is None and "no verdict" in ev.verdict
    assert res.policy("none").speedup_ci95 is not None  # none has its 3 pairs


def test_a_slower_policy_is_called_slower() -> None:
    runs = make_runs(policies=["device", "event"])
    for r in runs:
        if r["policy"] == "event":
            for k in r["ranks"]:
                k["step_us"] = [x * 2.2 for x in k["step_us"]]
    ev = analyze(runs, policies=["device", "event"]).policy("event")
    assert ev.verdict.startswith("event: 1.1") and "x slower than device" in ev.verdict


def test_ab_json_schema() -> None:
    res = analyze(make_runs(), order="random", seed=42)
    doc = json.loads(render_text(res, "json"))
    assert doc["version"] == 1 and doc["policies"] == POLICIES
    assert (doc["order"], doc["seed"], doc["rounds"]) == ("random", 42, 3)
    run = doc["runs"][0]
    assert {"index", "round", "policy", "status", "exit_status", "ranks",
            "median_step_us"} <= set(run)
    assert {"rank", "step_us", "host_step_us", "digest", "step_digests",
            "median_step_us"} <= set(run["ranks"][0])
    assert set(doc["summary"]) == set(POLICIES)
    dev, ev = doc["summary"]["device"], doc["summary"]["event"]
    assert {"median_step_us", "ci95_us", "rounds_ok"} <= set(dev)
    assert "speedup_vs_device" not in dev
    assert {"speedup_vs_device", "speedup_ci95", "paired", "resolved"} <= set(ev)
    assert len(ev["ci95_us"]) == 2 and len(ev["speedup_ci95"]) == 2
    assert doc["outputs_identical"] is True and doc["verdict"].startswith("event: ")
    assert doc["exit_status"] == 0 and doc["verdicts"]["none"].startswith("none: ")


def test_the_whatif_prediction_against_the_measured_event_runs() -> None:
    res = analyze(make_runs())
    wi = SimpleNamespace(drop="device-sync", max_model_error_pct=0.4, warnings=[], ranks=[
        SimpleNamespace(rank=0, basis="step", recorded_us=2400.0, predicted_us=1005.0,
                        error_band_pct=8.0),
        SimpleNamespace(rank=1, basis="step", recorded_us=2410.0, predicted_us=1015.0,
                        error_band_pct=9.0)])
    attach(res, overlay(wi, "runs/traced"))
    ov = res.whatif
    assert ov["predicted_step_us"] == 1015.0 and ov["recorded_step_us"] == 2410.0
    assert ov["band_pct"] == 9.0 and ov["predicted_band_us"] == [923.65, 1106.35]
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
    res = analyze(make_runs(rounds=2), rounds=2)
    attach(res, {"run": "runs/traced", "predicted_step_us": 1000.0, "recorded_step_us": 2400.0,
                 "band_pct": 5.0, "predicted_speedup": 2.4})
    ov = res.whatif
    assert ov["measured_ci95_us"] is None and "prediction_in_ci" not in ov
    assert ov["prediction_error_pct"] == -1.67  # 1,017 us measured (2 rounds)
    assert ("measured event 1,017.0 (too few rounds for a confidence interval (2; at least "
            "3)): -1.7%") in " ".join(render_text(res, "table").split())
