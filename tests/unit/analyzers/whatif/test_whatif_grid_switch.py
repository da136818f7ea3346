"""``benchmarks/grid_switch.py`` and ``whatif_grid.py capture --traces *-switch``: the
what-if checked inside one traced process that ran both policies."""

from __future__ import annotations

import io
import json
from pathlib import Path

import grid_switch
import pytest
from profplug.analyzers import whatif_paths

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT / "benchmarks" / "whatif_grid_data" / "switchS1"


def test_capture_switch_one_process_per_shape_first_policy_alternating(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import whatif_grid

    cmds: list[list[str]] = []

    def fake_run(cmd: list[str], log: Path, env: dict, timeout: float) -> dict:
        cmds.append(cmd)
        return {"cmd": cmd, "exit": 0, "wall_s": 0.0, "printed_step_us": None, "log": log.name}

    monkeypatch.setattr(whatif_grid, "_run", fake_run)
    whatif_grid.main(["capture", "--out", str(tmp_path), "--traces", "kineto-switch,nsys-switch",
             "--repeats", "2", "--shapes", "h512_l8_b8_s2", "--skip", "20", "--window", "30",
             "--nsys", "/x/nsys"])
    assert len(cmds) == 4  # 2 repeats x 2 profilers, one process each
    firsts = []
    for c in cmds:
        job = c[c.index("--") + 1:]
        first, then = c[c.index("--sync") + 1], job[job.index("--switch") + 1]
        assert then.startswith("50:") and then[3:] != first  # skip + window, the other one
        assert c[c.index("--steps") + 1] == "60" and c[c.index("--skip") + 1] == "20"
        assert job[job.index("--steps") + 1] == "90"
        assert ("--nsys" in c) == (c[c.index("--trace") + 1] == "nsys")
        firsts.append(first)
    assert firsts == ["device", "device", "event", "event"]  # alternating over repeats
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert man["runs"][0]["dir"] == "kineto-switch/h512_l8_b8_s2/device-first/r0"


def test_switch_run_numbers_follow_the_whatif_of_each_half() -> None:
    """On a real H200 run: predicted = whatif of the decode.device steps, measured = the
    recorded decode.event steps; the GPU-bound shape (hidden 16384) is predicted within 2%."""
    cells = {(c.profiler, c.shape): c for c in grid_switch.collect([DATA])}
    assert len(cells) == 8 and all(len(c.runs) == 3 for c in cells.values())
    c = cells[("kineto", "h16384_l8_b8_s2")]
    run = c.runs[0]
    dev = whatif_paths([run.path], step_range="decode.device").ranks[0]
    evt = whatif_paths([run.path], step_range="decode.event").ranks[0]
    assert run.predicted == dev.predicted_us and run.measured == evt.recorded_us
    assert run.device_recorded == dev.recorded_us > run.predicted
    assert run.error == pytest.approx(100 * (run.predicted - run.measured) / run.measured)
    assert all(abs(r.error) < 2.0 for r in c.runs)
    assert [r.first for r in c.runs].count("device") in (1, 2)  # both orders present
    assert 3.0 < run.launch_dev_us < 10.0 and 3.0 < run.launch_evt_us < 10.0


def test_cell_headline_is_the_median_of_the_runs_own_errors() -> None:
    def run(pred: float, meas: float, dev_launch: float = 5.0, evt_launch: float = 5.0
            ) -> grid_switch.SwitchRun:
        return grid_switch.SwitchRun(path="x", first="device", device_recorded=pred * 1.1,
                            predicted=pred, replay_err_pct=0.0, band_pct=10.0, measured=meas,
                            launch_dev_us=dev_launch, launch_evt_us=evt_launch)

    # the host flips mode between the halves of the third run: a 50% miss on its own
    c = grid_switch.SwitchCell("kineto", "h512_l8_b8_s2",
                      [run(102, 100), run(204, 200), run(150, 100, 7.0, 5.0)])
    assert c.paired == pytest.approx([2.0, 2.0, 50.0])
    assert c.paired_median == pytest.approx(2.0)
    assert c.error == pytest.approx(100 * (150 - 100) / 100)  # medians of unpaired values
    assert [r.steady for r in c.runs] == [True, True, False]
    assert [r.in_band for r in c.runs] == [True, True, False]
    out = io.StringIO()
    grid_switch.render([c], out, held_out=())
    text = out.getvalue()
    assert "+2.0" in text and "2/3" in text and "steady-host runs 2/2" in text
