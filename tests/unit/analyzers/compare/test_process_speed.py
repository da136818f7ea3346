"""A traced pair whose processes ran at different speeds names no winner: when run.json's
untraced steps tell another story than the traced ones (the two observer effects differ
beyond their noise), or differ beyond their noise where the runs' device-wide synchronizes
do not explain it (as many on both, or the run with fewer is the slower), ``compare`` says
so, declares no winner and does not judge the prediction, nor does ``whatif --against``; a
pair whose untraced steps agree with its traced ones and with its synchronizes (an A/A, or a
real policy effect the profiler slowed alike) gets no such warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers.compare.process_speed import process_speed
from profplug.analyzers.compare.reports import compare
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from synth import write_run

from profplug.cli.main import main

JITTER = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99, 1.0, 1.005]  # +-1%: under the floor


def _timing(us: float) -> dict:
    return {"clock": "events", "step_us": [round(us * j, 3) for j in JITTER]}


def _run(root: Path, kind: str, traced_us: float, untraced_us: float | None,
         name: str | None = None) -> Path:
    """compare's synthetic ``kind`` run (two ranks) in ``root/[name/]kind`` with a run.json
    whose ranks timed ``traced_us`` steps in the window and ``untraced_us`` before it."""
    d = write_run(root if name is None else root / name, kind)
    ranks = [{"rank": r, "timing": _timing(traced_us),
              "untraced": None if untraced_us is None else {
                  "before": _timing(untraced_us), "after": None}} for r in range(2)]
    (d / "run.json").write_text(json.dumps({"command": ["python", "loop.py"],
                                            "ranks": ranks}))
    return d


def test_untraced_steps_that_contradict_the_traced_ones_mean_no_winner(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # given a device run (100 us traced, 100 untraced) and an event run whose process ran
    # slow from its start (80 us traced, 160 untraced): the traced steps say event is
    # faster, the untraced ones that it is slower
    dev = _run(tmp_path, "device", 100.0, 100.0)
    evt = _run(tmp_path, "event", 80.0, 160.0)
    run = report_analyses(True, cross_rank=False)
    cmp = compare(analyze([dev], run=run), analyze([evt], run=run), "device", "event")
    # then the observer effects (0% and -50%) are a factor of 2 apart, beyond the noise
    assert cmp.speed is not None and cmp.speed.differs
    assert cmp.speed.factor == pytest.approx(0.5)
    assert (cmp.speed.overhead_pct("a"), cmp.speed.overhead_pct("b")) == pytest.approx(
        (0.0, -50.0))
    # and no verdict names a winner, the prediction is not judged, a warning says why
    assert cmp.verdict().startswith("no winner, the processes ran at different speeds: "
                                    "B - A = -20.0 us/step")
    assert all(rc.verdict("device", "event").startswith("no winner") for rc in cmp.ranks)
    assert all(rc.device_sync_share is None for rc in cmp.ranks)
    assert cmp.answer is not None and cmp.answer.within_band is None
    assert "not judged, the processes ran at different speeds" in cmp.answer.sentence(
        "device", "event")
    warning = cmp.mismatches[-1]
    assert warning.startswith("the processes ran at different speeds: untraced (run.json) "
                              "device 100.0 vs event 160.0 us/step, traced 100.0 vs 80.0; "
                              "untraced event over device: a factor of 1.60 (beyond the noise")
    assert "traced over untraced: device +0.0%, event -50.0%, a factor of 2.00 apart (beyond " \
        "the noise" in warning and "`profplug ab`" in warning
    # and both signs fired: event, with fewer synchronizes, is the slower untraced
    assert cmp.speed.untraced_differs and cmp.speed.observer_differs
    assert "no winner from this pair (the untraced steps differ beyond their noise, and " \
        "event, with fewer synchronizes, is the slower and the observer effects differ " \
        "beyond their noise)" in warning
    doc = cmp.to_dict()
    assert doc["speed"]["differs"] is True and doc["answer"]["within_band"] is None
    # and the CLI prints the warning once, before the answer, and nobody "faster"
    assert main(["compare", str(dev), str(evt), "--whatif"]) == 0
    out = capsys.readouterr().out
    assert out.count("the processes ran at different speeds: untraced") == 1
    assert out.index("warning: the processes ran at different speeds") < out.index(
        "what-if predicted")
    assert " faster" not in out


def test_whatif_against_a_run_at_another_process_speed_is_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dev = _run(tmp_path, "device", 100.0, 100.0)
    evt = _run(tmp_path, "event", 80.0, 160.0)
    out = tmp_path / "w.json"
    assert main(["whatif", str(dev), "--against", str(evt), "-f", "json", "-o", str(out)]) == 0
    against = json.loads(out.read_text())["against"]
    # then every rank's inside/outside is withheld, and the first warning says why
    assert [r["inside"] for r in against["ranks"]] == [None, None]
    assert against["warnings"][0].startswith("the processes ran at different speeds")
    assert against["warnings"][0].endswith("the prediction is not judged against it")
    assert main(["whatif", str(dev), "--against", str(evt)]) == 0
    table = capsys.readouterr().out
    assert "warning: the processes ran at different speeds" in table


@pytest.mark.parametrize(("b_kind", "traced", "untraced"), [
    ("device", 100.0, 100.0),  # an A/A: two runs of one policy, alike inside and outside
    ("event", 80.0, 80.0),  # a real effect the profiler slowed alike: 0.8x both ways
])
def test_untraced_steps_that_agree_with_the_traced_ones_say_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], b_kind: str, traced: float,
        untraced: float) -> None:
    dev = _run(tmp_path, "device", 100.0, 100.0)
    other = _run(tmp_path, b_kind, traced, untraced, name="b")
    assert main(["compare", str(dev), str(other), "--whatif"]) == 0
    out = capsys.readouterr().out
    cmp = compare(analyze([dev]), analyze([other]), "device", b_kind)
    # then the check ran and found one speed: no warning, the usual verdict
    assert cmp.speed is not None and not cmp.speed.differs
    assert cmp.speed.factor == pytest.approx(1.0)
    assert (cmp.speed.syncs_a, cmp.speed.syncs_b) == (1.0, 1.0 if b_kind == "device" else 0.0)
    assert "different speeds" not in out and "no winner" not in out
    if b_kind == "event":
        assert "step time: event faster: B - A = -20.0 us/step" in out


def test_the_check_is_the_same_whichever_run_is_a(tmp_path: Path) -> None:
    dev = _run(tmp_path, "device", 100.0, 100.0)
    evt = _run(tmp_path, "event", 80.0, 160.0)
    ma, mb = (json.loads((d / "run.json").read_text()) for d in (dev, evt))
    ab = process_speed(ma, mb, lambda: ({0: 1.0, 1: 1.0}, {0: 0.0, 1: 0.0}))
    ba = process_speed(mb, ma, lambda: ({0: 0.0, 1: 0.0}, {0: 1.0, 1: 1.0}))
    assert ab is not None and ba is not None
    assert ab.factor == pytest.approx(1.0 / ba.factor)
    assert ab.untraced_factor == pytest.approx(1.0 / ba.untraced_factor)
    assert (ab.noise_factor, ab.untraced_noise_factor, ab.differs) == (
        ba.noise_factor, ba.untraced_noise_factor, ba.differs)


def test_without_untraced_steps_there_is_no_check(tmp_path: Path) -> None:
    dev = _run(tmp_path, "device", 100.0, None)
    evt = _run(tmp_path, "event", 80.0, 160.0)
    cmp = compare(analyze([dev]), analyze([evt]), "device", "event")
    assert cmp.speed is None and cmp.verdict().startswith("event faster")
    assert not any("speed" in m for m in cmp.mismatches)


# Each pair's two runs as (kind, traced us, untraced us) in run.json, and which sign fires:
# (the untraced steps, the observer effects). Every run's observer effect is about +104%.
SIGNS = {
    # a slow event process (on one H100, 1,220.8 us untraced against device's 490.0; `ab`
    # found event 1.07x faster): event, with fewer synchronizes, is the slower untraced
    "slow event process": (("device", 1000.0, 490.0), ("event", 2491.4, 1220.8), True, False),
    # a policy effect the profiler slowed alike: event, with fewer, is the faster untraced
    "policy effect": (("device", 1400.0, 1000.0), ("event", 700.0, 500.0), False, False),
    # an A/A whose second process ran slow: as many synchronizes, other untraced steps
    "A/A, one slow process": (("device", 1000.0, 490.0), ("device", 2491.4, 1220.8), True,
                              False),
    "A/A": (("device", 1000.0, 490.0), ("device", 1000.0, 490.0), False, False),
}


def _pair(root: Path, case: str) -> tuple[Path, Path]:
    (ka, ta, ua), (kb, tb, ub), _, _ = SIGNS[case]
    return _run(root, ka, ta, ua, name="a"), _run(root, kb, tb, ub, name="b")


@pytest.mark.parametrize("case", list(SIGNS))
def test_untraced_steps_the_synchronizes_do_not_explain_mean_no_winner(
        tmp_path: Path, case: str) -> None:
    a, b = _pair(tmp_path, case)
    untraced, observer = SIGNS[case][2:]
    run = report_analyses(True, cross_rank=False)  # the what-if too: compare's answer
    cmp = compare(analyze([a], run=run), analyze([b], run=run), "A", "B")
    assert cmp.speed is not None
    assert (cmp.speed.untraced_differs, cmp.speed.observer_differs) == (untraced, observer)
    # then a pair flagged by either sign names no winner and judges no prediction
    assert cmp.verdict().startswith("no winner") == cmp.speed.differs == untraced
    assert cmp.answer is not None and (cmp.answer.within_band is None) == untraced
    if case == "policy effect":  # the traces' own winner stands
        assert cmp.verdict().startswith("B faster")
        assert cmp.speed.untraced_factor == pytest.approx(0.5) and cmp.speed.untraced_beyond
        assert "untraced B over A: a factor of 0.50 (beyond the noise" in cmp.speed.sentence(
            "A", "B")  # beyond the noise, but the run with fewer syncs is the faster one


def test_a_slow_process_with_fewer_synchronizes_is_said_with_its_numbers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # given the slow event process: traced and untraced both say device is faster
    dev, evt = _pair(tmp_path, "slow event process")
    assert main(["compare", str(dev), str(evt), "--whatif"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the text's lines joined
    # then the warning gives both signs' numbers and says the untraced steps fired
    warning = out[out.index("warning: the processes ran at different speeds"):]
    assert ("untraced (run.json) device 490.0 vs event 1,220.8 us/step, traced 1,000.0 vs "
            "2,491.4; untraced event over device: a factor of 2.49 (beyond the noise"
            ) in warning
    assert "device-wide synchronizes per step: device 1.0, event 0.0; traced over untraced: " \
        "device +104.1%, event +104.1%, a factor of 1.00 apart (within the noise" in warning
    assert ("no winner from this pair (the untraced steps differ beyond their noise, and "
            "event, with fewer synchronizes, is the slower); `profplug ab`") in warning
    assert " faster" not in out and "not judged, the processes ran at different speeds" in out


def test_an_a_a_pair_at_two_speeds_is_said_with_its_numbers(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, "A/A, one slow process")
    cmp = compare(analyze([a]), analyze([b]), "a", "b")
    assert cmp.speed is not None
    # (its two synthetic runs share their traces: the same-run warning may come first)
    speed = next(m for m in cmp.mismatches if "processes ran at different speeds" in m)
    assert ("device-wide synchronizes per step: a 1.0, b 1.0" in speed
            and "(the untraced steps differ beyond their noise, with as many synchronizes on "
            "both)" in speed)


def test_whatif_against_a_slow_process_with_fewer_synchronizes_is_not_judged(
        tmp_path: Path) -> None:
    dev, evt = _pair(tmp_path, "slow event process")
    out = tmp_path / "w.json"
    assert main(["whatif", str(dev), "--against", str(evt), "-f", "json", "-o", str(out)]) == 0
    against = json.loads(out.read_text())["against"]
    assert [r["inside"] for r in against["ranks"]] == [None, None]
    assert "event, with fewer synchronizes, is the slower" in against["warnings"][0]
    assert against["warnings"][0].endswith("the prediction is not judged against it")


@pytest.mark.parametrize("case", list(SIGNS))
def test_each_sign_is_the_same_whichever_run_is_a(tmp_path: Path, case: str) -> None:
    a, b = _pair(tmp_path, case)
    ra, rb = analyze([a]), analyze([b])
    ab, ba = compare(ra, rb).speed, compare(rb, ra).speed
    assert ab is not None and ba is not None
    assert (ab.untraced_differs, ab.observer_differs) == (ba.untraced_differs,
                                                          ba.observer_differs)
    assert (ab.noise_factor, ab.untraced_noise_factor) == (ba.noise_factor,
                                                           ba.untraced_noise_factor)
    assert ab.untraced_factor == pytest.approx(1.0 / ba.untraced_factor)
