"""run.json (written by ``profplug run`` beside the traces, read with them) is input like the
traces: nested deeper than any run.json is ignored, and the page's tables of it are bounded;
a step time out of range is one line naming the field, and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers.render.html import meta_html
from synth import one_error, run_folder, sync_loop

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
def test_run_json_step_time_out_of_range_is_one_line(tmp_path: Path, capsys, value: str,
                                                     says: str) -> None:
    run, _ = run_folder(tmp_path)
    text = ('{"world_size": 1, "ranks": [{"rank": 0, "timing": {"step_us": [100.0, VALUE]}, '
            '"untraced": {"before": {"step_us": [90, 90, 90, 90, 90]}}}]}')
    (run / "run.json").write_text(text.replace("VALUE", value))
    for fmt in ("table", "json"):
        assert main(["report", str(run / "kineto"), "-f", fmt, "--no-whatif"]) == 2
        line = one_error(capsys)
        assert "run.json: ranks[0].timing.step_us[1]" in line and says in line
    assert main(["whatif", str(run / "kineto"), "--unprofiled", "auto", "-f", "json"]) == 2
    assert says in one_error(capsys)
