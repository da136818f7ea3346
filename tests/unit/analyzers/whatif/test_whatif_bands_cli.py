"""What ``whatif`` says about its band when its inputs cannot give a good one (a CI that
does not hold its step, a step no host scale replays at), and which flags do not go
together; on the one-rank decode-loop trace shipped with the A/B sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[4]
TRACED = ROOT / "sample_traces/ab_h200_decode_loop/traced_device"
EVENT = ROOT / "sample_traces/pp2_infer_kineto/event"

pytestmark = [pytest.mark.skipif(not TRACED.is_dir(), reason="no sample traces here"),
              pytest.mark.samples_read_once]  # the commands these tests run


def _json(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "w.json"
    assert main(["whatif", str(TRACED), *args, "-f", "json", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def _finding(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "w.txt"
    assert main(["whatif", str(TRACED), *args, "-o", str(out)]) == 0
    return " ".join(out.read_text().split("\n\n")[0].split())


def test_a_ci_that_does_not_hold_its_step_is_not_used_and_the_finding_says_so(
        tmp_path: Path) -> None:
    text = _finding(tmp_path, "--unprofiled", "70", "--unprofiled-ci", "100,200")
    assert ("warning: unprofiled-ci: the given 95% CI 100.0-200.0 us does not hold the given "
            "step 70.0 us: not used") in text


def test_a_band_is_never_narrower_than_the_calibrations_miss(tmp_path: Path) -> None:
    # no host scale replays the trace at 30 us: the replay misses it by far
    w = _json(tmp_path, "--unprofiled", "30")["whatif"]
    r = w["ranks"][0]
    assert abs(r["model_error_pct"]) > 100
    assert w["predicted_step"]["band_pct"] >= abs(r["model_error_pct"])
    assert "no host scale" in _finding(tmp_path, "--unprofiled", "30")


def test_the_given_step_is_not_called_the_traces(tmp_path: Path) -> None:
    text = _finding(tmp_path, "--unprofiled", "498.5")
    assert "traced median step of 1,312 us" in text and "of 498.5 us" in text
    assert "median step of 498" not in text
    w = _json(tmp_path, "--unprofiled", "498.5")["whatif"]
    for r in w["ranks"]:  # idle by cause per step of the calibrated replay: inside its step
        assert sum(r["recorded_idle_by_cause_us"].values()) <= r["replayed_us"]


def test_against_does_not_go_with_unprofiled(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", str(TRACED), "--unprofiled", "498.5", "--against", str(EVENT)]) != 0
    assert "--against holds the traced prediction" in capsys.readouterr().err


def test_an_event_run_has_nothing_to_drop(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    assert main(["whatif", str(EVENT), "-f", "json", "-o", str(out)]) == 0
    p = json.loads(out.read_text())["predicted_step"]
    assert p["nothing_to_drop"] is True and p["band_pct"] is None and p["speedup"] is None
