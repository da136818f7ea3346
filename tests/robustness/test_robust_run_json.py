"""run.json (written by ``profplug run`` beside the traces, read with them) is input like the
traces: nested deeper than any run.json is ignored, and the page's tables of it are bounded;
a value out of range (a 401-digit integer, a step time of 1e300 us) is ignored alone, with a
warning naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers.render.html import meta_html
from synth import run_folder, sync_loop

from profplug.cli.main import main


def test_a_deep_run_json_is_ignored_and_meta_tables_are_bounded(tmp_path: Path,
                                                                capsys) -> None:
    sync_loop(tmp_path / "rank0.json")
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(800):
        cur["x"] = {}
        cur = cur["x"]
    (tmp_path / "run.json").write_text(json.dumps({"command": ["python"], "deep": deep}))
    page = tmp_path.parent / "p.html"
    assert main(["report", str(tmp_path), "--html", str(page), "--no-whatif"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    html = meta_html({"deep": deep, "list": json.loads("[" * 900 + "]" * 900)})
    assert "(nested too deep to show)" in html


@pytest.mark.parametrize("value, says", [("9" * 401, "401-digit integer"),
                                         ("1e400", "not a finite number"),
                                         ("5e-324", "is not a step time"),
                                         ("1e300", "is not a step time")])
def test_a_run_json_value_out_of_range_is_ignored_alone_and_said(tmp_path: Path, capsys,
                                                                 value: str, says: str) -> None:
    run, _ = run_folder(tmp_path)
    text = ('{"world_size": 1, "ranks": [{"rank": 0, "timing": {"step_us": [100.0, VALUE]}, '
            '"untraced": {"before": {"step_us": [90, 90, 90, 90, 90]}}}]}')
    (run / "run.json").write_text(text.replace("VALUE", value))
    for fmt in ("table", "json"):
        assert main(["report", str(run / "kineto"), "-f", fmt, "--no-whatif"]) == 0
        err = capsys.readouterr().err
        assert "Traceback" not in err
        if fmt == "json":  # the table shows its warnings itself
            assert "run.json: ranks[0].timing.step_us[1]" in err and says in err
            assert "ignored" in err
    # the rest of run.json is used: the untraced steps before the window (90 us)
    assert main(["whatif", str(run / "kineto"), "--unprofiled", "auto", "-f", "json"]) == 0
    assert "the untraced median step of run.json, 90.0 us" in capsys.readouterr().err
