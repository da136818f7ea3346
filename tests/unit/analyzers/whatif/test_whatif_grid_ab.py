"""``benchmarks/grid_ab.py``: the what-if's validation table from grid rows and ab ground truth."""

from __future__ import annotations

import io
import json
from pathlib import Path

import grid_ab
import grid_table

ROOT = Path(__file__).resolve().parents[4]


def _ab(d: Path, shape: str, dev: float, evt: float, ci: list[float]) -> None:
    (d / shape).mkdir(parents=True)
    (d / shape / "ab.json").write_text(json.dumps({"rounds": 3, "summary": {
        "device": {"median_step_us": dev, "ci95_us": [dev - 5, dev + 5]},
        "event": {"median_step_us": evt, "ci95_us": ci, "speedup_vs_device": dev / evt,
                  "speedup_ci95": [1.0, 1.2]}}}))


def _row(shape: str, pred: list[float], meas: list[float], host: list[float],
         unprof: list[float]) -> grid_table.Row:
    r = grid_table.Row("kineto", shape, 0, "grid")
    r.device = [grid_table.RankRun(recorded=p * 1.1, host=4.8, gap=9.0, predicted=p, band=10.0)
                for p in pred]
    r.event = [grid_table.RankRun(recorded=m, host=h, gap=9.0) for m, h in zip(meas, host, strict=True)]
    r.unprof_pred, r.unprof_band = unprof, [12.0] * len(unprof)
    r.unprof_cal = [7.0] * len(unprof)
    r.host_adj = [2.0] * (len(pred) * len(meas))
    return r


def test_cells_errors_goals_and_sets(tmp_path: Path) -> None:
    abdir = tmp_path / "grid_ab"
    _ab(abdir, "h512_l8_b8_s2", 500.0, 440.0, [420.0, 450.0])
    _ab(abdir, "h2048_l8_b8_s2", 770.0, 466.0, [447.0, 799.0])
    grid = tmp_path / "grid"
    grid.mkdir()
    ab = grid_ab.find_ab([grid])  # found beside the grid
    assert set(ab) == {"h512_l8_b8_s2", "h2048_l8_b8_s2"} and ab["h512_l8_b8_s2"].event == 440.0
    # (the speedup's CI only when ab's rounds were paired: none here)
    assert grid_ab.ab_unprofiled(ab)["h512_l8_b8_s2"] == {"device": [500.0], "event": [440.0],
                                                      "device_ci": [495.0, 505.0],
                                                      "speedup_ci": []}
    rows = [_row("h512_l8_b8_s2", [700.0, 730.0, 820.0], [630.0, 610.0, 1030.0],
                 [4.8, 4.7, 6.4], [450.0, 449.0, 452.0]),
            _row("h2048_l8_b8_s2", [1260.0, 630.0, 1350.0], [650.0, 640.0, 765.0],
                 [5.0, 4.9, 5.3], [705.0, 690.0, 707.0])]
    cs = grid_ab.cells(rows, ab)
    assert [c.set for c in cs] == ["tune", "held-out"]
    c = cs[0]
    assert round(c.error, 1) == round(100 * (730 - 630) / 630, 1)
    assert c.slow_evt == 1 and c.slow_dev == 0
    assert round(c.unprof_error or 0, 2) == round(100 * (450 - 440) / 440, 2)
    assert c.in_ci() is True and c.in_band() is True
    h = cs[1]
    assert h.in_ci() is True and h.in_band() is False  # +51%: inside ab's wide CI only
    buf = io.StringIO()
    grid_ab.render(cs, buf, markdown=True)
    text = buf.getvalue()
    assert text.startswith("| set | profiler | shape |")
    assert "tune kineto: profiled within 10% on 0/1" in text
    assert "at matched host speed (same-mode host-adj median) on 1/1" in text
    assert c.host_adj == [2.0] * 6  # the pairs with the slow event run left out
    assert "held-out kineto: profiled within 10% on 0/1" in text
    fit = grid_ab.band_fit(rows, cs)
    assert fit[0].startswith("band fit, profiled (grid tuning shapes, 9 host-adj pairs,")
    assert "calibration term (the prediction's change over ab's device CI) median 7.0%" in fit[1]
    assert fit[2].startswith("band coverage, held-out shapes: profiled host-adj pairs")
    grid_ab.dump(cs, tmp_path / "cells.json")
    assert json.loads((tmp_path / "cells.json").read_text())[0]["in_ci"] is True


def test_capture_ab_runs_profplug_ab_once_per_shape(tmp_path: Path, monkeypatch) -> None:
    import whatif_grid

    cmds: list[list[str]] = []

    def fake_run(cmd: list[str], log: Path, env: dict, timeout: float) -> dict:
        cmds.append(cmd)
        return {"cmd": cmd, "exit": 0, "wall_s": 0.0, "printed_step_us": None, "log": log.name}

    monkeypatch.setattr(whatif_grid, "_run", fake_run)
    whatif_grid.main(["capture", "--out", str(tmp_path), "--traces", "ab", "--repeats", "2",
             "--shapes", "h512_l8_b8_s2,h1024_l16_b1_s2", "--ab-rounds", "4"])
    assert len(cmds) == 4  # not yet written: ab.json is made by the real run
    c = cmds[0]
    assert c[c.index("-o") + 1] == str(tmp_path / "ab" / "h512_l8_b8_s2")
    assert c[c.index("--rounds") + 1] == "4" and c[c.index("--policies") + 1] == "device,event"
    assert c[c.index("--") + 1:][-2:] == ["--steps", "125"]
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert {r["dir"] for r in man["runs"]} == {"ab/h512_l8_b8_s2", "ab/h1024_l16_b1_s2"}
