"""The A/B's table and HTML page (synthetic runs): 80 columns, every section, escaping."""

from __future__ import annotations

import json
import re

from profplug.analyzers.ab import AbResult
from profplug.analyzers.render.ab_html import plot_data
from profplug.analyzers.render.registry import formats, render_text
from unit.analyzers.test_ab_analyze import analyze, make_runs


def test_formats_are_table_and_json() -> None:
    assert formats(AbResult) == ["table", "json"]


def test_table_fits_80_columns_and_holds_every_part() -> None:
    res = analyze(make_runs(failed={4}))
    res.warnings.append("a warning long enough to need wrapping " * 4)
    text = render_text(res, "table")
    assert max(len(line) for line in text.splitlines()) <= 80
    for part in ("profplug ab: device vs event vs none, 3 rounds, interleaved",
                 "9 runs, 1 failed; steps 2..21 of each run; step time: CUDA events",
                 "device     3/3", "event      2/3", "rank policy", "outputs: identical",
                 "verdict: event: ", "verdict: none: ", "failed: run 4", "warning: a warning"):
        assert part in text, part


def test_html_page_has_its_plots_data_and_escapes_the_command() -> None:
    res = analyze(make_runs(failed={4}))
    res.command = ["python", "<script>alert(1)</script>"]
    page = render_text(res, "html")
    for pid in ("ab-plot-runs", "ab-plot-ci", "ab-plot-speedup", "ab-plot-hist",
                "ab-summary", "ab-runs-table", "ab-outputs"):
        assert f'id="{pid}"' in page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    raw = re.search(r'<script type="application/json" id="ab-data">(.*?)</script>', page, re.S)
    data = json.loads(raw.group(1))
    assert [r["label"] for r in data["runs"]][:3] == ["r0 device", "r0 event", "r0 none"]
    assert data["runs"][4]["ok"] is False and len(data["runs"][0]["q"]) == 5
    assert sum(data["hist"]["event"]) == 2 * 20  # two ok rounds of 20 steps
    assert data["whatif"] is None


def test_plot_data_carries_the_whatif_lines() -> None:
    res = analyze(make_runs())
    res.whatif = {"predicted_step_us": 1000.0, "recorded_step_us": 2400.0,
                  "measured_policy": "event", "predicted_band_us": [900.0, 1100.0],
                  "traced": {"predicted_step_us": 1200.0}}
    assert plot_data(res)["whatif"] == {"predicted": 1000.0, "band": [900.0, 1100.0],
                                        "traced": 1200.0, "recorded": 2400.0,
                                        "policy": "event"}
