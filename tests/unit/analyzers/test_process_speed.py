"""A traced pair whose processes ran at different speeds names no winner: when run.json's
untraced steps tell another story than the traced ones (the two observer effects differ
beyond their noise), ``compare`` says so, declares no winner and does not judge the
prediction, nor does ``whatif --against``; a pair whose untraced steps agree with its traced
ones (an A/A, or a real policy effect the profiler slowed alike) gets no such warning."""

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
                              "device 100.0 vs event 160.0 us/step, traced 100.0 vs 80.0")
    assert "traced over untraced: device +0.0%, event -50.0%, a factor of 2.00 apart (beyond " \
        "the noise" in warning and "`profplug ab`" in warning
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
    assert "different speeds" not in out and "no winner" not in out
    if b_kind == "event":
        assert "step time: event faster: B - A = -20.0 us/step" in out


def test_the_check_is_the_same_whichever_run_is_a(tmp_path: Path) -> None:
    dev = _run(tmp_path, "device", 100.0, 100.0)
    evt = _run(tmp_path, "event", 80.0, 160.0)
    ma, mb = (json.loads((d / "run.json").read_text()) for d in (dev, evt))
    ab, ba = process_speed(ma, mb), process_speed(mb, ma)
    assert ab is not None and ba is not None
    assert ab.factor == pytest.approx(1.0 / ba.factor)
    assert (ab.noise_factor, ab.differs) == (ba.noise_factor, ba.differs)


def test_without_untraced_steps_there_is_no_check(tmp_path: Path) -> None:
    dev = _run(tmp_path, "device", 100.0, None)
    evt = _run(tmp_path, "event", 80.0, 160.0)
    cmp = compare(analyze([dev]), analyze([evt]), "device", "event")
    assert cmp.speed is None and cmp.verdict().startswith("event faster")
    assert not any("speed" in m for m in cmp.mismatches)
