"""One run, one step time and one band in every command: ``report``, ``whatif``, ``ab``'s
overlay (``ab --whatif`` / ``ab-report``) and ``whatif --unprofiled`` (times in us).

The run: ``synth.planted_trace``, the planted 5,100 us step among 100 us ones, on 2 ranks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers import analyze
from profplug.analyzers.ab.overlay import whatif_overlay
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import whatif, whatif_analysis, whatif_unprofiled
from synth import PLANTED_PERIOD, planted_trace

from profplug.cli.main import main

P = PLANTED_PERIOD


def run(tmp: Path) -> Path:
    d = tmp / "run"
    d.mkdir()
    for rank in (0, 1):
        planted_trace(rank).write(d / f"rank{rank}.json")
    return d


def test_the_step_is_the_same_in_report_whatif_and_ab(tmp_path: Path) -> None:
    d = run(tmp_path)
    rep = analyze(d, run=[whatif_analysis()])
    res = whatif(load_timelines([d]))
    ov = whatif_overlay([d], "device")  # ab --whatif at the traced host speed
    for r in rep.ranks:
        assert r.steps is not None and r.steps.period_us == P  # the planted step left out
        assert rep.run["whatif"].rank(r.rank).recorded_us == P
        assert res.rank(r.rank).recorded_us == P
    assert ov["recorded_step_us"] == P
    slow = max(res.ranks, key=lambda x: x.predicted_us)
    assert (ov["predicted_step_us"], ov["band_pct"]) == (slow.predicted_us, slow.error_band_pct)


def test_the_unprofiled_band_is_the_same_in_whatif_and_ab(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = run(tmp_path)
    step_us, ci = 80.0, (75.0, 85.0)
    ov = whatif_overlay([d], "device", step_us, ci)  # what ab-report shows
    res = whatif_unprofiled(load_timelines([d]), step_us, step_ci_us=ci)
    slow = max(res.ranks, key=lambda x: x.predicted_us)
    assert (ov["predicted_step_us"], ov["band_pct"]) == (slow.predicted_us, slow.error_band_pct)
    # and on the command line
    assert main(["whatif", str(d), "--unprofiled", "80", "--unprofiled-ci", "75,85",
                 "-f", "json"]) == 0
    got = json.loads(capsys.readouterr().out)["whatif"]["ranks"]
    assert max(r["error_band_pct"] for r in got if r["predicted_us"] == slow.predicted_us) \
        == ov["band_pct"]
    for bad in ("75", "85,75", "a,b"):
        assert main(["whatif", str(d), "--unprofiled", "80", "--unprofiled-ci", bad]) == 2
        assert "--unprofiled-ci" in capsys.readouterr().err
    assert main(["whatif", str(d), "--unprofiled-ci", "75,85"]) == 2
    assert "goes with --unprofiled" in capsys.readouterr().err
