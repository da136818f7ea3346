"""Real browser: headless Chromium opens the HTML report offline; no script errors, the
headline is the first thing on the page, the timeline and bars render (their colours are on
the screenshot) and the timeline opens on a few steps, and a hostile trace runs no script.

Chromium is the ``chromium`` fixture (tests/integration/conftest.py): Debian's ``chromium``
package, installed when missing (CI runs as root); the tests are skipped, with the reason,
only when that is impossible.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers.compare.reports import compare
from profplug.analyzers.render.html import COLORS, render_html
from profplug.analyzers.report.analysis import analyze
from sample_cache import sample_run_dirs
from synth import build_rank, write_run

from profplug.cli.main import main

pytestmark = [pytest.mark.browser, pytest.mark.samples_read_once]

HOSTILE = ("<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','1')\">"
           "<script>document.documentElement.setAttribute('data-pwned','1')</script>")


def _run(tmp: Path) -> list[Path]:
    """The 2-GPU decode loop's device run (host-bound idle shows), else any sample run."""
    runs = sample_run_dirs()
    decode = [r for r in runs if "pp2_infer_kineto" in str(r) and "device" in str(r)]
    return (decode or runs)[:1] if runs else [write_run(tmp, "device")]


def test_compare_page_renders_without_errors(chromium: Any, tmp_path: Path) -> None:
    # given the compare page of a device run and an event run (synthetic)
    a = analyze([write_run(tmp_path, "device")])
    b = analyze([write_run(tmp_path, "event")])
    page = tmp_path / "compare.html"
    with page.open("w") as f:
        render_html(a, f, compare=compare(a, b, "device", "event"))
    # when Chromium loads it and dumps the DOM after the scripts ran
    res = chromium.open(page, tmp_path, "--dump-dom")
    dom = res.stdout
    # then no script error, the timeline drawn, the bars there
    html_tag = re.search(r"<html[^>]*>", dom)
    assert html_tag is not None, res.stderr[-2000:]
    assert "data-errors" not in html_tag.group(0), html_tag.group(0)
    assert 'data-rendered="1"' in html_tag.group(0)
    assert '<svg id="bars"' in dom and 'id="timeline"' in dom
    assert chromium.console_errors(res.stderr) == []


def test_screenshot_shows_the_plots(chromium: Any, tmp_path: Path) -> None:
    # given a report of the synthetic device run (a known, large device_sync share)
    page = tmp_path / "report.html"
    with page.open("w") as f:
        render_html(analyze([write_run(tmp_path, "device")]), f)
    shot = tmp_path / "shot.png"
    # when screenshotted
    res = chromium.open(page, tmp_path, f"--screenshot={shot}",
                    "--window-size=1200,2200", "--hide-scrollbars")
    assert shot.is_file(), res.stderr[-2000:]
    png = shot.read_bytes()
    # then the plot colours are on it (nothing else on the page uses them)
    # compute (timeline and bars)
    assert chromium.colour_pixels(png, COLORS["compute"]) > 2000
    assert chromium.colour_pixels(png, COLORS["device_sync"]) > 500
    assert chromium.console_errors(res.stderr) == []


def test_sample_run_screenshot_shows_the_plots(chromium: Any, tmp_path: Path) -> None:
    # given the report of a real sample run (the synthetic run when none is shipped)
    page = tmp_path / "report.html"
    with page.open("w") as f:
        render_html(analyze(_run(tmp_path)), f)
    shot = tmp_path / "shot.png"
    res = chromium.open(page, tmp_path, f"--screenshot={shot}",
                    "--window-size=1200,2200", "--hide-scrollbars")
    assert shot.is_file(), res.stderr[-2000:]
    # then compute and host-bound idle (the bulk of a real decode window) are drawn
    png = shot.read_bytes()
    assert chromium.colour_pixels(png, COLORS["compute"]) > 2000
    assert chromium.colour_pixels(png, COLORS["host_bound"]) > 500
    assert chromium.console_errors(res.stderr) == []


def test_hostile_trace_runs_no_script(chromium: Any, tmp_path: Path) -> None:
    # given a trace whose kernel and annotation names are HTML that would run script
    d = tmp_path / "evil"
    d.mkdir()
    build_rank("device", 0, kernel=HOSTILE, annotation=HOSTILE).write(d / "rank0.json")
    page = tmp_path / "evil.html"
    with page.open("w") as f:
        render_html(analyze([d]), f)
    # when the browser opens it
    res = chromium.open(page, tmp_path, "--dump-dom")
    html_tag = re.search(r"<html[^>]*>", res.stdout)
    # then nothing ran, the page still rendered, and the name shows as text
    assert html_tag is not None and "data-pwned" not in html_tag.group(0)
    assert 'data-rendered="1"' in html_tag.group(0)
    assert "&lt;script&gt;document.documentElement" in res.stdout


def test_headline_of_a_real_sample_reads_from_the_dom(chromium: Any, tmp_path: Path) -> None:
    # given the page `profplug report` writes for a real sample run (the what-if included)
    run = _run(tmp_path)
    page, doc = tmp_path / "report.html", tmp_path / "report.json"
    assert main(["report", *map(str, run), "--html", str(page), "-f", "json", "-o",
                 str(doc)]) == 0
    headline = json.loads(doc.read_text())["headline"]
    # when Chromium has run its scripts
    res = chromium.open(page, tmp_path, "--dump-dom")
    dom = res.stdout
    # then the headline is the page's first paragraph after the title, as in the JSON
    m = re.search(r'<div id="headline"><p>(.*?)</p>', dom, re.S)
    assert m is not None, dom[:2000]
    assert html.unescape(m.group(1)) == headline
    assert dom.index('id="headline"') < dom.index('id="summary"') < dom.index('id="timeline"')
    if "pp2_infer_kineto" in str(run[0]):
        assert re.match(r"Measured: device-wide synchronizes in the pipeline send/recv left "
                        r"rank \d's GPU idle [\d,]+ us/step \([\d.]+% of its median step of "
                        r"[\d,]+ us\) at recv_from_prev_pipeline_rank_ > sync\.device\. "
                        r"Predicted with event-based waits: [\d,]+ us/step on rank \d, the "
                        r"slowest \(1\.\d\dx the run's step; \+-\d+% for a separate traced "
                        r"run\); `profplug ab` measures it without a "
                        r"profiler\.$", headline), headline
    # and the timeline opened on the view the page data asked for (a few steps), drawn
    view = re.search(r'id="timeline"[^>]*data-view="([^"]+)"', dom) or \
        re.search(r'data-view="([^"]+)"[^>]*id="timeline"', dom)
    data = json.loads(html.unescape(re.search(
        r'id="profplug-data">(.*?)</script>', dom, re.S).group(1)))
    assert view is not None
    assert [float(x) for x in view.group(1).split(",")] == data["timeline"]["view"]
    html_tag = re.search(r"<html[^>]*>", dom)
    assert html_tag is not None and 'data-rendered="1"' in html_tag.group(0)
    assert "data-errors" not in html_tag.group(0)
    assert chromium.console_errors(res.stderr) == []


HOVER = """<script>
(function () {  /* test only: hover the middle of the first device_sync gap in view */
  var d = JSON.parse(document.getElementById("profplug-data").textContent).timeline;
  var g = d.gaps.device_sync, v = d.view, c = document.getElementById("tl-main");
  var r = c.getBoundingClientRect(), pw = r.width - 160 - 12;
  for (var i = 0; i < g.s.length; i++) {
    var mid = (g.s[i] + g.e[i]) / 2;
    if (mid > v[0] && mid < v[1]) {
      c.dispatchEvent(new PointerEvent("pointermove", {bubbles: true,
        clientX: r.left + 160 + (mid - v[0]) / (v[1] - v[0]) * pw,
        clientY: r.top + 28 + g.y[i] * 24 + 12}));
      break;
    }
  }
})();
</script></body>"""


def test_hovering_a_gap_names_its_sync_and_call_site(chromium: Any, tmp_path: Path) -> None:
    # given the synthetic device run's page, with a script hovering a device_sync gap
    page = tmp_path / "report.html"
    with page.open("w") as f:
        render_html(analyze([write_run(tmp_path, "device")]), f)
    page.write_text(page.read_text().replace("</body>", HOVER))
    # when Chromium runs it
    res = chromium.open(page, tmp_path, "--dump-dom")
    # then the tooltip shows the gap's cause, duration, API and call site, as text
    tip = re.search(r'<div id="tl-tip"[^>]*>(.*?)</div>', res.stdout, re.S)
    assert tip is not None, res.stdout[-3000:]
    assert "hidden" not in tip.group(0)
    assert html.unescape(tip.group(1)) == (
        "device_sync  30 us\nat 170 us (rank 0 gpu 0)\nAPI: cudaDeviceSynchronize\n"
        "call site: profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device")


def test_cross_rank_section_draws_its_plots(chromium: Any, tmp_path: Path) -> None:
    # given the report page of a synthetic 4-stage pipeline with the cross-rank analysis and a
    # hostile annotation around one of rank 0's launches
    from profplug.analyzers.crossrank import cross_rank_analysis
    from profplug.analyzers.render.registry import render_text
    from synth.pipeline import PipelineSpec, write

    paths, _ = write(PipelineSpec(stages=4, steps=5, slow_stage=1), tmp_path / "run")
    doc = json.loads(paths[0].read_text())
    doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": HOSTILE,
                               "pid": 1000, "tid": 1, "ts": 0.0, "dur": 400.0})
    paths[0].write_text(json.dumps(doc))
    page = tmp_path / "xr.html"
    page.write_text(render_text(analyze([tmp_path / "run"], run=[cross_rank_analysis()]),
                                "html"))
    # when Chromium loads it
    res = chromium.open(page, tmp_path, "--dump-dom")
    dom = res.stdout
    html_tag = re.search(r"<html[^>]*>", dom)
    # then no error, nothing hostile ran, and the swimlane, queue and lead plots are there
    # (inline SVG, drawn without a script), the swimlane with its parts and its rows
    assert html_tag is not None, res.stderr[-2000:]
    assert "data-errors" not in html_tag.group(0) and "data-pwned" not in html_tag.group(0)
    for kind in ("xr-swim", "xr-queue", "xr-lead"):
        assert re.search(rf'<svg class="xr-plot {kind}"', dom), kind
    swim = re.search(r'<svg class="xr-plot xr-swim".*?</svg>', dom, re.S)
    assert swim is not None
    assert 'data-part="compute"' in swim.group(0) and 'data-part="peer_wait"' in swim.group(0)
    assert all(f">rank {r}</text>" in swim.group(0) for r in range(4))


# A run directory named like HTML: 90px red text and an image whose error handler marks the
# page (no '/', so it is one directory name).
HOSTILE_DIR = ('<span style="font-size:90px;color:red">big<img src=x onerror="document.'
               "documentElement.setAttribute('data-pwned','1')\">")


def test_hostile_run_label_is_text_on_the_compare_page(chromium: Any, tmp_path: Path
                                                       ) -> None:
    # given `profplug compare` of two runs, run A in a directory named like HTML (its label)
    a = tmp_path / HOSTILE_DIR
    a.mkdir()
    for rank in (0, 1):
        build_rank("device", rank).write(a / f"rank{rank}.json")
    b = write_run(tmp_path, "event")
    page = tmp_path / "compare.html"
    assert main(["compare", str(a), str(b), "--html", str(page), "-o",
                 str(tmp_path / "cmp.txt")]) == 0
    # when Chromium renders the page and runs its scripts
    res = chromium.open(page, tmp_path, "--dump-dom")
    dom = res.stdout
    html_tag = re.search(r"<html[^>]*>", dom)
    assert html_tag is not None, res.stderr[-2000:]
    assert 'data-rendered="1"' in html_tag.group(0)
    # then nothing from the label ran or styled the page: no image, no 90px span, no mark
    assert "data-pwned" not in html_tag.group(0) and "data-errors" not in html_tag.group(0)
    assert not re.search(r"<img\b", dom)
    assert not re.search(r"<span[^>]*font-size:\s*90px", dom)
    # and the label is on the page as text (the run sections, the bars' row names)
    assert dom.count(html.escape(HOSTILE_DIR, quote=False)) >= 2
    assert chromium.console_errors(res.stderr) == []
    assert chromium.console_errors(res.stderr) == []
