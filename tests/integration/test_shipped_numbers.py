"""The shipped A/B runs say what today's code says of them: each ``sample_traces/ab_*``'s
``ab.json`` and ``ab.html`` equal what ``profplug.analyzers.ab.reanalyze`` makes of its
recorded runs now (statistics, verdicts, the what-if recomputed from its traced run), so a
change of the code that moves one of their figures fails here until
``scripts/refresh_shipped.py`` is run and the change looked at."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers.ab.reanalyze import reanalyze
from profplug.analyzers.commands.ab_report import ab_json_text
from profplug.analyzers.render.registry import render_text

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.parent for p in (ROOT / "sample_traces").glob("ab_*/ab.json"))


@pytest.mark.parametrize("out", SHIPPED, ids=[p.name for p in SHIPPED])
def test_a_shipped_ab_run_holds_the_figures_the_code_computes_now(
        out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the stored what-if runs are named from the repository root
    doc = json.loads((out / "ab.json").read_text())
    res = reanalyze(doc, out)
    assert ab_json_text(res) == (out / "ab.json").read_text(), (
        f"{out.name}/ab.json drifted: run scripts/refresh_shipped.py")
    if (out / "ab.html").exists():
        assert render_text(res, "html") == (out / "ab.html").read_text(), (
            f"{out.name}/ab.html drifted: run scripts/refresh_shipped.py")


def test_a_stored_prediction_of_another_ab_says_so(tmp_path: Path) -> None:
    # given the shipped A/B whose what-if was calibrated on its own device median, with its
    # device rounds twice as slow and the traced run gone: the stored prediction is kept
    doc = json.loads((ROOT / "sample_traces/ab_h200_decode_loop/ab.json").read_text())
    for r in doc["runs"]:
        if r["policy"] == "device":
            for k in r["ranks"]:
                k["step_us"] = [2 * x for x in k["step_us"]]
    doc["whatif"]["run"] = str(tmp_path / "gone")
    doc["whatif"].pop("run_path", None)
    res = reanalyze(doc)
    line = " ".join(render_text(res, "table").split())
    assert res.whatif is not None and res.whatif["recomputed"] is False
    assert "stored prediction calibrated on a device step of 498.5 us" in line
    assert "not this A/B's prediction" in line
