"""Real browser on the ``profplug ab`` page (inline SVG, no script): no error, all four
plots in the rendered page with their marks, the policy colours on the screenshot (the
``chromium`` fixture: tests/integration/conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers.render.palette import policy_color
from profplug.analyzers.render.registry import render_text
from synth import ab_result, ab_runs

pytestmark = pytest.mark.browser


def _page(tmp: Path) -> Path:
    res = ab_result(ab_runs(rounds=4), rounds=4)
    res.whatif = {"run": "runs/traced", "predicted_step_us": 1100.0, "recorded_step_us": 2300.0,
                  "measured_policy": "event", "predicted_band_us": [1000.0, 1200.0]}
    page = tmp / "ab.html"
    page.write_text(render_text(res, "html"))
    return page


def test_ab_page_renders_its_four_plots(chromium: Any, tmp_path: Path) -> None:
    res = chromium.open(_page(tmp_path), tmp_path, "--dump-dom")
    tag = re.search(r"<html[^>]*>", res.stdout)
    assert tag is not None, res.stderr[-2000:]
    assert "data-errors" not in tag.group(0)
    for pid, mark in (("ab-plot-runs", "<rect"), ("ab-plot-ci", 'class="ci"'),
                      ("ab-plot-speedup", 'class="ci"'), ("ab-plot-hist", 'class="whatif"')):
        svg = re.search(rf'<svg id="{pid}".*?</svg>', res.stdout, re.S)
        assert svg is not None and mark in svg.group(0), pid
    assert chromium.console_errors(res.stderr) == []


def test_ab_screenshot_shows_the_policies(chromium: Any, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    res = chromium.open(_page(tmp_path), tmp_path, f"--screenshot={shot}",
                    "--window-size=1200,2400", "--hide-scrollbars")
    assert shot.is_file(), res.stderr[-2000:]
    png = shot.read_bytes()
    for policy in ("device", "event", "none"):
        assert chromium.colour_pixels(png, policy_color(policy)) > 200, policy
