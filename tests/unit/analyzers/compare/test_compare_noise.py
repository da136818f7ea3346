"""``compare`` answers the question: the step-time difference against the noise
(``compare.noise``), A's what-if against B's measurement and the mismatch warnings
(``compare.answer``). Exact answers on synthetic series; an A/A on the shipped repeats."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.compare.answer import mismatches, whatif_answer_ab
from profplug.analyzers.compare.noise import block_length, noise_test, spread_pct
from profplug.analyzers.compare.reports import compare
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import DropSpec, whatif_unprofiled
from synth import write_run

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

SAMPLES = Path(__file__).resolve().parents[4] / "sample_traces"


def test_equal_steps_differ_beyond_the_floor() -> None:
    # given 10 steps of 100 us against 10 steps of 80 us, in ns (no spread: the 2% floor)
    t = noise_test([100_000] * 10, [80_000] * 10)
    # then B - A = -20 us, 20% of A's step (the slower), the CI a point, the noise the
    # larger floor (2% of 100 us), and it is a difference
    assert t is not None
    assert (t.step_a_us, t.step_b_us, t.diff_us, t.slower, t.diff_pct, t.ci95_us) == (
        100.0, 80.0, -20.0, "A", -20.0, (-20.0, -20.0))
    assert (t.spread_a_us, t.spread_b_us, t.noise_us) == pytest.approx((2.0, 1.6, 2.0))
    assert t.noise_pct == pytest.approx(2.0) and t.resolved
    assert t.sentence("A", "B") == (
        "B faster: B - A = -20.0 us/step (-20.0% of A's step; noise ±2.0%)")


def test_a_shift_inside_the_step_spread_is_no_difference() -> None:
    # given steps alternating 90/110 us (median 100, MAD 10: spread 14.826%) and the same
    # steps 10 us slower (B: median 110, the slower step)
    a = np.array([90_000, 110_000] * 10)
    assert spread_pct(a) == pytest.approx(14.826)
    t = noise_test(a, a + 10_000)
    # then the 10 us (9.1% of B's step) is inside the per-step spread (14.826 us): no winner
    assert t is not None and t.diff_us == 10.0 and t.diff_pct == pytest.approx(100 / 11)
    assert not t.resolved and t.noise_us >= 14.826
    assert t.sentence("A", "B") == (f"no difference beyond the noise: B - A = +10.0 us/step "
                                    f"(+9.1% of B's step; noise ±{t.noise_pct:.1f}%)")


def test_the_noise_is_the_pairs_whichever_run_is_a() -> None:
    # given two noisy series of different lengths (a drifting one and a jittery one, ns)
    rng = np.random.default_rng(7)
    a = (100_000 + np.cumsum(rng.integers(-900, 1000, 40))).astype(np.int64)
    b = (93_000 + rng.integers(-6_000, 6_000, 27)).astype(np.int64)
    ab, ba = noise_test(a, b), noise_test(b, a)
    assert ab is not None and ba is not None
    # then swapping them mirrors the difference and its CI and keeps the noise and the base
    assert ba.diff_us == -ab.diff_us and ba.diff_pct == -ab.diff_pct
    assert ba.ci95_us == (-ab.ci95_us[1], -ab.ci95_us[0])
    assert (ba.noise_us, ba.noise_pct, ba.resolved) == (ab.noise_us, ab.noise_pct, ab.resolved)
    assert {ab.slower, ba.slower} == {"A", "B"}
    # and, the runs named, the same sentence with the signs of B - A turned
    flip = str.maketrans("+-", "-+")
    (head_ab, tail_ab), (head_ba, tail_ba) = (x.split(" = ") for x in (
        ab.sentence("a", "b"), ba.sentence("b", "a")))
    assert head_ab == head_ba and tail_ab == tail_ba.translate(flip)


def test_too_few_steps_no_test_and_block_length() -> None:
    assert noise_test([1_000, 2_000], [1_000, 2_000, 3_000]) is None
    assert [block_length(n) for n in (1, 3, 4, 15, 16, 42, 43, 91)] == [1, 1, 2, 2, 3, 3, 4, 4]


def test_whatif_answer_on_synthetic_runs(tmp_path: Path) -> None:
    # given the synthetic device run (with its what-if) and the event run (80 us steps)
    run = report_analyses(True, cross_rank=False)
    a = analyze([write_run(tmp_path, "device")], run=run)
    b = analyze([write_run(tmp_path, "event")], run=run)
    cmp = compare(a, b, "device", "event")
    pred = max(a.run["whatif"].ranks, key=lambda r: r.predicted_us)
    ans = cmp.answer
    # then the answer is the slowest rank's prediction against B's median step (80.0 us,
    # steps alike: the 2% floor as its spread), error (X - 80) / 80, with the band for a
    # separate run (B is one traced run: its host's speed is its own)
    assert ans is not None and cmp.mismatches == []
    assert (ans.predicted_us, ans.band_pct) == (pred.predicted_us, pred.run_band_pct)
    assert pred.run_band_pct >= pred.error_band_pct
    assert (ans.measured_us, ans.measured_lo_us, ans.measured_hi_us) == pytest.approx(
        (80.0, 78.4, 81.6))
    assert ans.error_pct == pytest.approx((pred.predicted_us - 80.0) / 80.0 * 100.0)
    assert ans.sentence("device", "event").startswith(
        f"device's what-if predicted {pred.predicted_us:,.0f} us/step (±"
        f"{pred.run_band_pct:.0f}%: ")
    assert "event measured 80 us/step (step spread 78-82): error " in ans.sentence(
        "device", "event")
    # and against an ab.json: the policy's median and its CI over rounds
    ab = {"summary": {"event": {"median_step_us": 75.0, "ci95_us": [70.0, 90.0],
                                "rounds_ok": 5}}}
    abans = whatif_answer_ab(a, ab)
    assert abans is not None and abans.measured_by == "95% CI over 5 rounds"
    assert (abans.measured_lo_us, abans.measured_hi_us) == (70.0, 90.0)
    doc = cmp.to_dict()
    assert doc["answer"]["measured_us"] == 80.0 and doc["noise"]["resolved"] is True
    assert doc["verdict"].startswith("event faster: B - A = ")


def test_aa_repeats_no_difference_beyond_the_noise(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    # given two repeats of one device run (the shipped kineto2 and kineto3: 6,484 vs 7,137
    # us/step median, steps spread by 8-14%)
    a = SAMPLES / "pp2_infer_repeats/kineto2/device"
    b = SAMPLES / "pp2_infer_repeats/kineto3/device"
    assert main(["compare", str(a), str(b), "--no-whatif"]) == 0
    out = capsys.readouterr().out
    # then no winner, per pipeline and per rank, and no cost share of a non-difference
    assert "step time: no difference beyond the noise: B - A = +653.3 us/step" in out
    assert "rank 0: no difference beyond the noise" in out
    assert "rank 1: no difference beyond the noise" in out
    assert "faster" not in out and "of it" not in out
    assert "warning" not in out  # the same command, ranks and steps


def test_unrelated_runs_are_named_before_the_answer() -> None:
    # given the 2-rank decode loop and the 1-rank three_waits run
    a = analyze([SAMPLES / "pp2_infer_kineto/device"])
    b = analyze([SAMPLES / "h200_three_waits/kineto"])
    lines = mismatches(a, b, "decode", "waits")
    # then every difference is named
    assert [m.split(" (")[0] for m in lines] == [
        "the runs ran different commands", "the runs have different rank counts",
        "the runs have different step counts", "the runs do different GPU work per step"]
    assert "(decode: 2, waits: 1)" in lines[1] and "(decode: 20, waits: 10 steps" in lines[2]


def test_compare_with_an_ab_dir_uses_its_ci(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # given the traced device run and the ab directory of the same job
    ab = SAMPLES / "ab_h200_decode_loop"
    out = tmp_path / "c.json"
    assert main(["compare", str(ab / "traced_device"), str(ab), "-f", "json", "-o",
                 str(out)]) == 0
    doc = json.loads(out.read_text())
    stored = json.loads((ab / "ab.json").read_text())
    ans = doc["answer"]
    # then A's what-if is made at ab's unprofiled device step (as `ab --whatif` did) and
    # set against ab's event median and its 95% CI over rounds
    assert doc["calibrated_on_us"] == stored["summary"]["device"]["median_step_us"]
    dev = stored["summary"]["device"]
    fresh = whatif_unprofiled(load_timelines([ab / "traced_device"]), dev["median_step_us"],
                              DropSpec(), step_ci_us=tuple(dev["ci95_us"]))
    assert ans["predicted_us"] == pytest.approx(
        max(r.predicted_us for r in fresh.ranks), abs=0.01)
    assert (ans["measured_us"], [ans["measured_lo_us"], ans["measured_hi_us"]]) == (
        stored["summary"]["event"]["median_step_us"], stored["summary"]["event"]["ci95_us"])
    err = 100.0 * (ans["predicted_us"] - ans["measured_us"]) / ans["measured_us"]
    assert ans["measured_by"] == "95% CI over 5 rounds"
    assert ans["error_pct"] == pytest.approx(err, abs=0.001)
    main(["compare", str(ab / "traced_device"), str(ab)])
    printed = capsys.readouterr().out
    table = " ".join(printed.split())
    assert f"measured 461 us/step (95% CI over 5 rounds 452-465): error {err:+.1f}%" in table
    assert max(len(line) for line in printed.splitlines()) <= 80
