"""The HTML report: every rank present, numbers equal to the JSON report, no external loads,
every trace string escaped, timeline data bounded (one array per cause, capped gaps)."""

from __future__ import annotations

import html
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from profplug.analyzers.compare import compare
from profplug.analyzers.render.html import render_html, script_json, timeline_data
from profplug.analyzers.report import Report, analyze
from profplug.analyzers.stalls import CAUSES
from synth import KinetoTrace
from unit.analyzers.test_compare_synth import (
    N_STEPS,
    build_rank,
    sample_run_dirs,
    write_run,
)

EVIL = "<script>alert(1)</script>"
SUMMARY_KEYS = ["window_us", "step_us", "busy_us", "compute_us", "comm_us", "idle_us",
                *(f"{c}_us" for c in CAUSES), "stream_wait_us"]


def render(rep: Report, **kw: object) -> str:
    buf = io.StringIO()
    render_html(rep, buf, **kw)  # type: ignore[arg-type]
    return buf.getvalue()


def external_loads(page: str) -> list[str]:
    """Tags that would fetch something: <script src>, <link href>, <img/iframe src>, @import.

    plotly.js itself holds URL strings in its code (docs links, topojson defaults) that are
    never loaded here, so raw "https://" substrings are not a useful check.
    """
    pat = re.compile(r"<(script|link|img|iframe|source|embed)\b[^>]*\b(src|href)\s*=", re.I)
    return [m.group(0) for m in pat.finditer(page)] + re.findall(r"@import\s+url", page)


def summary_rows(page: str) -> dict[tuple[str, int], list[str]]:
    """(run, rank) -> the data-v values of the summary table row."""
    table = page[page.index('id="summary"'):]
    table = table[:table.index("</table>")]
    out = {}
    for m in re.finditer(r'<tr data-rank="(\d+)" data-run="([^"]*)">(.*?)</tr>', table):
        out[(m.group(2), int(m.group(1)))] = re.findall(r'data-v="([^"]*)"', m.group(3))
    return out


def json_summary(rank: dict) -> list[float | None]:
    vals = {k: rank[k] for k in ("window_us", "busy_us", "compute_us", "comm_us", "idle_us",
                                 "stream_wait_us")}
    vals.update({f"{c}_us": v for c, v in rank["idle_by_cause_us"].items()})
    vals["step_us"] = rank["steps"]["period_us"] if rank["steps"] else None
    return [vals[k] for k in SUMMARY_KEYS]


def _runs() -> list[str]:
    return ["synthetic/device", "synthetic/event", *map(str, sample_run_dirs())]


@pytest.fixture(params=_runs())
def run_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    kind = str(request.param)
    if kind.startswith("synthetic/"):
        return write_run(tmp_path, kind.split("/")[1])
    return Path(kind)


def test_every_rank_present_and_numbers_equal_json(run_dir: Path) -> None:
    # given a run, when rendered to HTML
    rep = analyze([run_dir])
    page = render(rep)
    doc = rep.to_dict()
    rows = summary_rows(page)
    # then each rank has a summary row whose values are the JSON report's numbers
    assert sorted(k[1] for k in rows) == sorted(r["rank"] for r in doc["ranks"])
    for r in doc["ranks"]:
        got = [None if v == "" else float(v) for v in rows[("", r["rank"])][3:]]
        assert got == json_summary(r)
    # and each rank with GPU work has a bar and a timeline row
    data = json.loads(re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1))
    gpu_ranks = [r["rank"] for r in doc["ranks"] if r["has_gpu_work"]]
    assert data["bars"]["rows"] == [f"rank {k}" for k in gpu_ranks]
    for c in CAUSES:
        assert data["bars"][c] == [r["idle_by_cause_us"][c] for r in doc["ranks"]
                                   if r["has_gpu_work"]]
    assert {row.split(" gpu ")[0] for row in data["timeline"]["rows"]} == {
        f"rank {k}" for k in gpu_ranks}
    # and nothing is loaded from outside the file; plotly.js is inlined exactly once
    assert external_loads(page) == []
    assert page.count("<script") == 4  # error recorder, data, plotly.js, app
    assert len(page) > 3_000_000  # plotly.js is ~4.8 MB


def test_synthetic_device_run_numbers(tmp_path: Path) -> None:
    page = render(analyze([write_run(tmp_path, "device")]))
    rows = summary_rows(page)
    # window 470, step 100, busy 350, compute 250, comm 100, idle 120 = device_sync 120
    assert [float(v) for v in rows[("", 0)][3:9]] == [470.0, 100.0, 350.0, 250.0, 100.0, 120.0]
    assert float(rows[("", 1)][9]) == 120.0
    assert "profplug.recv_from_prev_pipeline_rank_ &gt; profplug.sync.device" in page


def test_trace_strings_are_escaped(tmp_path: Path) -> None:
    # given a trace whose kernel name and annotation names are script tags, and a run.json
    d = tmp_path / "evil"
    d.mkdir()
    build_rank("device", 0, kernel=EVIL, annotation=EVIL).write(d / "rank0.json")
    tr = KinetoTrace(rank=1, pid=77)
    tr.annotation(EVIL, 0, 100)
    tr.launch(at=1, start=2, dur=10, name=EVIL)
    tr.runtime("cudaDeviceSynchronize", 5, 50)
    tr.launch(at=60, start=61, dur=10, name=EVIL)
    tr.write(d / "rank1.json")
    (d / "run.json").write_text(json.dumps({"command": EVIL, EVIL: [EVIL]}))
    rep = analyze([d])
    assert rep.meta  # the run.json was found
    # when rendered
    page = render(rep, whatif={"note": EVIL})
    # then the raw tag never appears; only the 4 scripts of the template exist
    assert EVIL not in page
    assert page.lower().count("<script") == 4
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # call site, meta, what-if
    data = re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and ">" not in data  # nothing closes the data's <script>
    # plotly draws tags found in text: the hover strings are entities it shows as text
    assert html.escape(EVIL, quote=False) in json.loads(data)["timeline"]["strings"]


def plotted_strings(doc: object) -> list[str]:
    """Every string of the plot data (what plotly may draw)."""
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in plotted_strings(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in plotted_strings(v)]
    return []


def test_compare_labels_reach_plotly_escaped(tmp_path: Path) -> None:
    # given two runs, one in a directory named like plotly's tags (a link, big red text)
    label = ('<a href="https://example.com">x</a><span style="font-size:90px;color:red">'
             "big</span>")
    a = analyze([write_run(tmp_path, "device")])
    b = analyze([write_run(tmp_path, "event")])
    # when compared in HTML with that label
    page = io.StringIO()
    render_html(a, page, compare=compare(a, b, label, "event"))
    data = json.loads(re.search(r'id="profplug-data">(.*?)</script>', page.getvalue(),
                                re.S).group(1))
    # then no string given to plotly holds a tag, and the label is there, escaped
    assert not [s for s in plotted_strings(data) if "<" in s or ">" in s]
    assert any(html.escape(label, quote=False) in row for row in data["bars"]["rows"])
    assert any(html.escape(label, quote=False) in row for row in data["timeline"]["rows"])
    assert label not in page.getvalue()


def test_script_json_cannot_close_the_script() -> None:
    s = script_json({"k": "</script><b>&'\u2028"})
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"k": "</script><b>&'\u2028"}


def test_timeline_busy_and_gaps_tile_the_window(tmp_path: Path) -> None:
    rep = analyze([write_run(tmp_path, "device")])
    tl, notes = timeline_data([("", rep)])
    assert notes == []
    # one array set per cause; N-1 device_sync gaps of 30 us per rank; N busy spans per rank
    g = tl["gaps"]["device_sync"]
    assert len(g["s"]) == 2 * (N_STEPS - 1)
    assert [round(e - s, 3) for s, e in zip(g["s"], g["e"], strict=True)] == [30.0] * 8
    assert len(tl["busy"]["s"]) == 2 * N_STEPS
    busy = sum(e - s for s, e in zip(tl["busy"]["s"], tl["busy"]["e"], strict=True))
    assert busy == pytest.approx(2 * 350.0)
    assert tl["busy"]["s"][0] == 0.0  # time axis starts at the run's first GPU op
    api = {tl["strings"][i] for i in g["api"]}
    assert api == {"cudaDeviceSynchronize"}


def test_timeline_caps_gaps_per_row_and_says_so(tmp_path: Path) -> None:
    rep = analyze([write_run(tmp_path, "device", n_ranks=1)])
    tl, notes = timeline_data([("", rep)], max_gaps=2)
    assert len(tl["gaps"]["device_sync"]["s"]) == 2
    assert len(tl["busy"]["s"]) == 3  # the gaps left out are drawn as busy
    assert notes == ["rank 0 gpu 0: drew the 2 longest of 4 gaps; the other 2 (60.0 us, "
                     "each <= 30.000 us) are drawn as busy"]


def test_thousands_of_gaps_stay_columnar(tmp_path: Path) -> None:
    # given 3000 steps (2999 gaps) on one rank
    d = tmp_path / "big"
    d.mkdir()
    build_rank("device", 0, n_steps=3000).write(d / "rank0.json")
    page = render(analyze([d]))
    data = json.loads(re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1))
    # then the timeline is one array per cause (the page builds one trace per cause)
    assert len(data["timeline"]["gaps"]["device_sync"]["s"]) == 2999
    assert set(data["timeline"]["gaps"]) == set(CAUSES)


@dataclass
class _WhatIf:
    saved_us: float


def test_compare_renders_both_runs(tmp_path: Path) -> None:
    a = analyze([write_run(tmp_path, "device")])
    b = analyze([write_run(tmp_path, "event")])
    cmp = compare(a, b, "device", "event")
    page = render(a, compare=cmp, whatif=_WhatIf(12.5))
    rows = summary_rows(page)
    assert sorted(rows) == [("device", 0), ("device", 1), ("event", 0), ("event", 1)]
    assert float(rows[("event", 0)][3]) == 390.0
    assert page.count("event faster by 20.0 us/step (20.0%); device&#x27;s device_sync idle "
                      "= 120% of it") == 2
    assert "&quot;saved_us&quot;: 12.5" in page
    assert external_loads(page) == []


def test_no_gpu_work_rank_is_listed(tmp_path: Path) -> None:
    tr = KinetoTrace(rank=0)
    tr.runtime("cudaDeviceSynchronize", 0, 5)
    tr.write(tmp_path / "r0.json")
    page = render(analyze([tmp_path / "r0.json"]))
    assert "rank 0: no GPU work in this rank&#x27;s trace" in page
    assert summary_rows(page)[("", 0)][3] == "0.0"


def test_whatif_result_gets_its_own_section(tmp_path: Path) -> None:
    from profplug.analyzers.whatif import whatif_paths

    d = write_run(tmp_path, "device")
    res = whatif_paths([d])
    page = render(analyze([d]), whatif=res)
    assert '<section class="whatif">' in page and "What if: without" in page
    assert external_loads(page) == []
