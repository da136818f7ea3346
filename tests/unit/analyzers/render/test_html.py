"""The HTML report: every rank present, numbers equal to the JSON report, no external loads,
every trace string escaped, timeline data bounded (one array per cause, capped gaps), the
finding first, a page of at most 2 MB."""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import sample_cache
from profplug.analyzers.compare.reports import Comparison, compare
from profplug.analyzers.render.html import script_json, timeline_data
from profplug.analyzers.render.registry import render_text
from profplug.analyzers.report.analysis import Report, RunAnalysis, analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.stalls.gaps import CAUSES
from sample_cache import sample_run_dirs
from synth import N_STEPS, KinetoTrace, build_rank, write_run

EVIL = "<script>alert(1)</script>"
SUMMARY_KEYS = ["window_us", "step_us", "busy_us", "compute_us", "comm_us", "idle_us",
                *(f"{c}_us" for c in CAUSES), "stream_wait_us"]


def render(rep: Report, *, compare: Comparison | None = None,
           run: tuple[RunAnalysis, ...] = ()) -> str:
    """The page of ``rep`` (of ``compare`` when given) with ``run`` as run-level results."""
    for result in run:
        rep.add(result)
    return render_text(compare if compare is not None else rep, "html")


@dataclass
class _Note:
    """A run-level result with no HTML renderer of its own: shown as escaped JSON."""

    key: ClassVar[str] = "note"
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def external_loads(page: str) -> list[str]:
    """Tags that would fetch something: <script src>, <link href>, <img/iframe src>, @import.

    Raw "https://" substrings are no useful check (a trace's strings may hold URLs, shown
    as text).
    """
    pat = re.compile(r"<(script|link|img|iframe|source|embed)\b[^>]*\b(src|href)\s*=", re.I)
    return [m.group(0) for m in pat.finditer(page)] + re.findall(r"@import\s+url", page)


def summary_rows(page: str) -> dict[tuple[str, int], list[str]]:
    """(run, rank) -> the data-v values of the summary table row, from its numbers on
    (the text cells, run on a comparison page, rank and source, left out)."""
    table = page[page.index('id="summary"'):]
    table = table[:table.index("</table>")]
    out = {}
    for m in re.finditer(r'<tr data-rank="(\d+)" data-run="([^"]*)">(.*?)</tr>', table):
        cells = re.findall(r'<td( class="t")? data-v="([^"]*)"', m.group(3))
        out[(m.group(2), int(m.group(1)))] = [v for t, v in cells if not t]
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


def _report(run_dir: Path, *, default: bool = False) -> Report:
    """The run's stall report (``default``: ``profplug report``'s, with its run-level
    analyses); a sample run's comes from the session's cache (``tests/sample_cache.py``)."""
    if run_dir.is_relative_to(sample_cache.SAMPLES):
        return sample_cache.report(run_dir) if default else sample_cache.stalls(run_dir)
    return analyze([run_dir], run=report_analyses(None) if default else ())


def test_every_rank_present_and_numbers_equal_json(run_dir: Path) -> None:
    # given a run, when rendered to HTML
    rep = _report(run_dir)
    page = render(rep)
    doc = rep.to_dict()
    rows = summary_rows(page)
    # then each rank has a summary row whose values are the JSON report's numbers
    assert sorted(k[1] for k in rows) == sorted(r["rank"] for r in doc["ranks"])
    for r in doc["ranks"]:
        got = [None if v == "" else float(v) for v in rows[("", r["rank"])]]
        assert got == json_summary(r)
    # and each rank with GPU work has a bar (its parts are the JSON's) and a timeline row
    data = json.loads(re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1))
    gpu_ranks = [r["rank"] for r in doc["ranks"] if r["has_gpu_work"]]
    svg = page[page.index('<svg id="bars"'):page.index("</svg>")]
    for c in CAUSES:
        shown = re.findall(rf'data-part="{c}"><title>rank (\d+): {c} ([\d,.]+) us', svg)
        want = [(str(r["rank"]), f"{r['idle_by_cause_us'][c]:,.1f}") for r in doc["ranks"]
                if r["has_gpu_work"] and r["idle_by_cause_us"][c] > 0]
        assert shown == want
    assert {row.split(" gpu ")[0] for row in data["timeline"]["rows"]} == {
        f"rank {k}" for k in gpu_ranks}
    # and nothing is loaded from outside the file: three scripts, all inline
    assert external_loads(page) == []
    assert page.count("<script") == 3  # error recorder, data, app
    # and the headline comes first, as in the JSON
    assert page.index('id="headline"') < page.index('id="summary"')
    assert f"<p>{html.escape(doc['headline'], quote=True)}</p>" in page


def test_synthetic_device_run_numbers(tmp_path: Path) -> None:
    page = render(analyze([write_run(tmp_path, "device")]))
    rows = summary_rows(page)
    # window 470, step 100, busy 350, compute 250, comm 100, idle 120 = device_sync 120
    assert [float(v) for v in rows[("", 0)][:6]] == [470.0, 100.0, 350.0, 250.0, 100.0, 120.0]
    assert float(rows[("", 1)][6]) == 120.0
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
    page = render(rep, run=(_Note(EVIL),))
    # then the raw tag never appears; only the 3 scripts of the template exist
    assert EVIL not in page
    assert page.lower().count("<script") == 3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # call site, meta, what-if
    data = re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1)
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in data
    assert EVIL in json.loads(data)["timeline"]["strings"]  # round-trips for the hover


HOSTILE_LABEL = ('<a href="https://example.com">x</a><span style="font-size:90px;color:red">'
                 "big</span>")


def test_hostile_compare_label_is_escaped_everywhere(tmp_path: Path) -> None:
    # given two runs, one in a directory named like HTML tags (a link, big red text)
    a = analyze([write_run(tmp_path, "device")])
    b = analyze([write_run(tmp_path, "event")])
    # when compared in HTML with that label
    page = render(a, compare=compare(a, b, HOSTILE_LABEL, "event"))
    # then the raw tags appear nowhere: the HTML parts (summary, bars SVG, run sections)
    # have it escaped, the page data has it as JSON text the script draws as text
    assert HOSTILE_LABEL not in page
    assert "<a " not in page  # the page has no links of its own
    assert html.escape(HOSTILE_LABEL, quote=True) in page
    data = re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and ">" not in data
    rows = json.loads(data)["timeline"]["rows"]
    assert any(r.startswith(HOSTILE_LABEL) for r in rows)  # raw text: canvas fillText


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
    assert len(tl["busy"]["s"]) == 3  # the gaps left out are drawn as GPU work
    assert notes == ["rank 0 gpu 0: drew the 2 longest of 4 gaps; the other 2 (60.0 us, "
                     "each <= 30.000 us) are drawn as GPU work",
                     "rank 0 gpu 0: drew the 1 longest of 5 comm spans; the other 4 (80.0 us) "
                     "are drawn as compute"]


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
    key: ClassVar[str] = "whatif"
    saved_us: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def test_compare_renders_both_runs(tmp_path: Path) -> None:
    a = analyze([write_run(tmp_path, "device")])
    b = analyze([write_run(tmp_path, "event")])
    cmp = compare(a, b, "device", "event")
    page = render(a, compare=cmp, run=(_WhatIf(12.5),))
    rows = summary_rows(page)
    assert sorted(rows) == [("device", 0), ("device", 1), ("event", 0), ("event", 1)]
    assert float(rows[("event", 0)][0]) == 390.0
    verdict = ("event faster by 20.0 us/step (20.0% of device&#x27;s step); device&#x27;s "
               "device_sync idle = 150% of it")
    # the finding first: the pipeline's step time against the noise (the synthetic steps are
    # all alike, so the noise is the 2% floor of the per-step spread); then the ranks
    headline = page[page.index('id="headline"'):page.index("</div>")]
    assert ('<p id="verdict">step time: event faster: B - A = -20.0 us/step (-20.0% of '
            "device&#x27;s step; noise ±2.0%)</p>") in headline
    assert headline.count(verdict) == 0 and page.count(verdict) == 2  # the verdicts table
    assert page.index('id="headline"') < page.index('id="verdicts"')
    # the header counts ranks per run, not "4 rank(s)"
    assert "A = device: 2 ranks (kineto) · B = event: 2 ranks (kineto)" in page
    assert "&quot;saved_us&quot;: 12.5" in page
    assert external_loads(page) == []


def test_no_gpu_work_rank_is_listed(tmp_path: Path) -> None:
    tr = KinetoTrace(rank=0)
    tr.runtime("cudaDeviceSynchronize", 0, 5)
    tr.write(tmp_path / "r0.json")
    page = render(analyze([tmp_path / "r0.json"]))
    assert "rank 0: no GPU work in this rank&#x27;s trace" in page
    # no rank has GPU work: a short page, without the empty GPU tables
    assert 'id="summary"' not in page and 'id="callsites"' not in page


def test_whatif_result_gets_its_own_section(tmp_path: Path) -> None:
    from profplug.analyzers import whatif_paths

    d = write_run(tmp_path, "device")
    res = whatif_paths([d])
    page = render(analyze([d]), run=(res,))
    assert '<section class="whatif">' in page and "What if: without" in page
    assert external_loads(page) == []


MAX_PAGE = 2_000_000  # bytes (pages with a plotting library inlined were ~5 MB)


def test_page_is_small_and_the_timeline_opens_on_a_few_steps(run_dir: Path) -> None:
    # given a run's report with the what-if (as `profplug report` writes it by default)
    rep = _report(run_dir, default=True)
    page = render(rep)
    # then the page is small (no plotting library inlined)
    assert len(page.encode()) <= MAX_PAGE
    # and the timeline opens on 3 steps (from the second), with the whole window reachable
    tl = json.loads(re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1))[
        "timeline"]
    v0, v1 = tl["view"]
    assert 0 <= v0 < v1 <= tl["end"]
    steps = tl["steps"]
    if len(steps) >= 5:
        assert [v0, v1] == [steps[1], steps[4]]
    if len(steps) >= 10:  # the samples: 20 steps or more
        assert v1 - v0 < tl["end"] / 3
    elif not steps:
        assert [v0, v1] == [0.0, tl["end"]]
    # and the what-if sits right after the per-rank summary, above the timeline
    if "whatif" in rep.run:
        assert page.index('id="summary"') < page.index('<section class="whatif">') \
            < page.index('id="timeline"')


def test_single_run_page_has_no_run_column(tmp_path: Path) -> None:
    page = render(analyze([write_run(tmp_path, "device")]))
    for table in ("summary", "callsites", "syncs"):
        head = page[page.index(f'id="{table}"'):]
        head = head[:head.index("</thead>")]
        assert ">run<" not in head
        assert ">rank<" in head


def test_metadata_is_collapsed_with_readable_dates(tmp_path: Path) -> None:
    # given a run.json as `profplug run` writes it (epoch times, the container's env)
    d = write_run(tmp_path, "device")
    (d / "run.json").write_text(json.dumps({
        "command": ["python3", "x.py"], "started": 1795972326.2060711,
        "env": {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0 " * 50},
        "ranks": [{"rank": 0, "started": 1795972335.6955986}]}))
    page = render(analyze([d]))
    # then it is one collapsed <details> at the end, dates in UTC, the command on one line
    meta = page[page.index('<details class="meta">'):]
    assert "<summary>Run metadata (run.json)</summary>" in meta
    assert "NVIDIA_REQUIRE_CUDA" in meta and "NVIDIA_REQUIRE_CUDA" not in page[:page.index(
        '<details class="meta">')]
    assert "2026-11-29 17:12:06 UTC" in meta and "2026-11-29 17:12:15 UTC" in meta
    assert ">python3 x.py<" in meta


def test_many_ranks_share_the_gap_budget_and_the_page_stays_small(tmp_path: Path) -> None:
    # given 12 ranks of 2,500 steps (2,499 gaps each: 30k gaps in all)
    from profplug.analyzers.render.timeline_data import MAX_GAPS_TOTAL, gaps_per_row

    d = tmp_path / "big"
    d.mkdir()
    for r in range(12):
        build_rank("device", r, n_steps=2500).write(d / f"rank{r}.json")
    page = render(analyze([d]))
    data = json.loads(re.search(r'id="profplug-data">(.*?)</script>', page, re.S).group(1))
    # then each row draws its share of the budget, says so, and the page stays under 2 MB
    assert gaps_per_row(12) == MAX_GAPS_TOTAL // 12 == 2000
    assert len(data["timeline"]["gaps"]["device_sync"]["s"]) == 12 * 2000
    assert page.count("drew the 2,000 longest of 2,499 gaps") == 12
    assert len(page.encode()) <= MAX_PAGE


def test_compare_page_shows_the_share_as_a_percentage(tmp_path: Path) -> None:
    # given the synthetic device/event runs (share 1.5 = 150%, as the verdict says)
    a, b = analyze(write_run(tmp_path, "device")), analyze(write_run(tmp_path, "event"))
    page = render_text(compare(a, b, "device", "event"), "html")
    verdicts = page[page.index('id="verdicts"'):]
    verdicts = verdicts[:verdicts.index("</table>")]
    # then the cell shows 150% and keeps the JSON's fraction in data-v
    assert re.findall(r'<td data-v="1.5">([^<]*)</td>', verdicts) == ["150%", "150%"]
    assert "= 150% of it" in verdicts
