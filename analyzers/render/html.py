"""Self-contained HTML report: no network, no plotting library, every trace string escaped.

The page, top to bottom: the headline (``id="headline"``: the finding in one sentence; with
``compare``, the verdict per rank) and the run's warnings; the comparison (with
``compare``); the per-rank summary (step us: the median over the non-outlier steps); the
outlier steps (what took the time, where; docs/costs.md); the top sections (the what-if); the timeline (a canvas
drawn by ``templates/report.js``: busy spans and idle gaps per rank and device, opening on a
few steps, with an overview strip to pan and zoom out to the whole window); each rank's GPU
window by cause (an inline SVG); sortable call-site and sync-API tables; notes; the other
sections (run-level results); the run metadata, collapsed, with readable dates. Times in us.
Table cells carry the JSON report's value in ``data-v``.

Sections are HTML strings from ``render.registry`` (each run-level result's own renderer):
``top`` ones go right after the summary, the others after the notes.

Trace strings reach the page through ``escape.e`` (HTML) and ``escape.script_json`` (the
embedded JSON, which the script shows only as text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import resources
from typing import TYPE_CHECKING, Any, TextIO

from profplug.analyzers.render.bars_svg import bars_svg, used_parts
from profplug.analyzers.render.compare_html import answer_html
from profplug.analyzers.render.compare_html import header_html as compare_header_html
from profplug.analyzers.render.escape import e, num_cell, script_json
from profplug.analyzers.render.palette import COLORS, legend_html
from profplug.analyzers.render.table import input_warnings
from profplug.analyzers.render.timeline_data import MAX_GAPS_PER_ROW, row_label, timeline_data
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.steps.observer import meta_line
from profplug.analyzers.steps.runstep import run_step, step_words
from profplug.analyzers.steps.stats import OUTLIER_K

if TYPE_CHECKING:
    from profplug.analyzers.compare.reports import Comparison
    from profplug.analyzers.report.analysis import Report

__all__ = ["COLORS", "MAX_GAPS_PER_ROW", "e", "render_html", "script_json", "timeline_data"]

MAX_CALLSITES_PER_RANK = 200
_MARK = re.compile(r"\{\{(\w+)\}\}")
EPOCH_KEYS = ("started", "ended", "start", "end", "time")  # run.json times, epoch seconds


def _template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text("utf-8")


def _runs(rep: Report, cmp: Comparison | None) -> list[tuple[str, Report]]:
    if cmp is None:
        return [("", rep)]
    return [(cmp.label_a, cmp.report_a), (cmp.label_b, cmp.report_b)]


# ------------------------------------------------------------------------------- tables
def _txt(s: object) -> str:
    return f'<td class="t" data-v="{e(s)}">{e(s)}</td>'


def _table(cls: str, head: list[str], rows: list[str], tid: str, ntext: int = 3) -> str:
    th = "".join(f'<th class="t">{e(h)}</th>' if i < ntext else f"<th>{e(h)}</th>"
                 for i, h in enumerate(head))
    return (f'<table class="{cls}" id="{tid}"><thead><tr>{th}</tr></thead><tbody>'
            + "".join(r if r.startswith("<tr") else f"<tr>{r}</tr>" for r in rows)
            + "</tbody></table>")


def _run_cells(runs: list[tuple[str, Report]], label: str) -> list[str]:
    """The "run" cell of a row: only on pages with several runs."""
    return [_txt(label)] if len(runs) > 1 else []


def _run_head(runs: list[tuple[str, Report]]) -> list[str]:
    return ["run"] if len(runs) > 1 else []


def summary_html(runs: list[tuple[str, Report]]) -> str:
    head = [*_run_head(runs), "rank", "source", "window us", "step us", "busy us",
            "compute us", "comm us", "idle us", *(f"{c} us" for c in CAUSES), "stream wait us"]
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            step = r.steps.period_us if r.steps and r.steps.n_steps else None
            ic = r.idle_by_cause_us()
            gpu = r.gpu_time()
            cells = [*_run_cells(runs, label), _txt(r.rank), _txt(r.source),
                     num_cell(gpu.window_us), num_cell(step),
                     *(num_cell(x) for x in (gpu.busy_us, gpu.compute_us, gpu.comm_us,
                                         gpu.idle_us)),
                     *(num_cell(round(ic[c], 3)) for c in CAUSES), num_cell(round(r.stream_wait_us, 3))]
            rows.append(f'<tr data-rank="{r.rank}" data-run="{e(label)}">' + "".join(cells)
                        + "</tr>")
    return _table("sortable", head, rows, "summary", len(_run_head(runs)) + 2)


def outliers_html(runs: list[tuple[str, Report]]) -> str:
    """The outlier steps of every rank (``steps.outliers``); empty when there are none."""
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            for o in r.steps.outliers if r.steps is not None else []:
                rows.append("".join([*_run_cells(runs, label), num_cell(r.rank, "d"),
                                     num_cell(o["step"], "d"), num_cell(o["step_us"]),
                                     _txt(o["dominant"]), _txt(o["callsite"] or "-")]))
    if not rows:
        return ""
    head = [*_run_head(runs), "rank", "step", "step us", "what took the time", "call site"]
    return ('<h2>Outlier steps</h2><p class="sub">steps more than '
            f"{OUTLIER_K:g} scaled MADs from their rank's median step: listed here, left out of every per-step figure (docs/"
            "costs.md)</p>" + _table("sortable", head, rows, "outliers",
                                     len(_run_head(runs)) + 1))


def callsites_html(runs: list[tuple[str, Report]]) -> str:
    head = [*_run_head(runs), "rank", "call site", "API", "count", "idle caused us",
            "idle / step us", "host blocked us"]
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            for c in r.callsites[:MAX_CALLSITES_PER_RANK]:
                rows.append("".join([*_run_cells(runs, label), num_cell(r.rank, "d"),
                                     _txt(c.callsite), _txt(c.api), num_cell(c.count, ",d"),
                                     num_cell(c.idle_caused_us), num_cell(c.idle_per_step_us),
                                     num_cell(c.host_blocked_us)]))
    return _table("sortable", head, rows, "callsites", len(_run_head(runs)) + 3)


def syncs_html(runs: list[tuple[str, Report]]) -> str:
    head = [*_run_head(runs), "rank", "sync API", "kind", "count", "host blocked us",
            "p50 us", "p99 us", "idle caused us"]
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            for s in r.syncs:
                rows.append("".join([*_run_cells(runs, label), num_cell(r.rank, "d"),
                                     _txt(s.api), _txt(s.kind), num_cell(s.count, ",d"),
                                     num_cell(s.host_blocked_us), num_cell(s.host_blocked_p50_us),
                                     num_cell(s.host_blocked_p99_us), num_cell(s.idle_caused_us)]))
    return _table("sortable", head, rows, "syncs", len(_run_head(runs)) + 3)


def compare_html(cmp: Comparison) -> str:
    from profplug.analyzers.render.compare_table import _rows

    out = ['<h2>Comparison</h2><p class="sub">A = <b>' + e(cmp.label_a) + "</b>, B = <b>"
           + e(cmp.label_b) + "</b>; delta = B - A; idle by cause per step when both runs "
           "have steps; diff % = the step-time difference / the slower run's step. "
           "device_sync share = device_sync idle per step of the slower run / step-time "
           "difference.</p>"]
    rows = [f'<tr data-rank="{rc.rank}">' + num_cell(rc.rank, "d")
            + f'<td class="t faster">{e(rc.verdict(cmp.label_a, cmp.label_b))}</td>'
            + num_cell(rc.shown_diff_us() if rc.faster else None) + num_cell(rc.diff_pct)
            + num_cell(rc.device_sync_share, ".0%")
            + "</tr>" for rc in cmp.ranks]
    out.append('<table id="verdicts"><thead><tr><th>rank</th><th class="t">verdict</th>'
               "<th>diff us/step</th><th>diff % of the slower step</th>"
               "<th>device_sync share</th></tr></thead>"
               "<tbody>" + "".join(rows) + "</tbody></table>")
    for rc in cmp.ranks:
        body = "".join(_cmp_row(lab, va, vb, d) for lab, va, vb, d in _rows(rc))
        out.append(f'<h3>rank {rc.rank}</h3><table class="cmp" data-rank="{rc.rank}">'
                   f'<thead><tr><th class="t"></th><th>{e(cmp.label_a)}</th>'
                   f"<th>{e(cmp.label_b)}</th><th>delta</th></tr></thead><tbody>{body}"
                   "</tbody></table>")
    return "".join(out)


def _cmp_row(label: str, va: float | None, vb: float | None, d: float | None) -> str:
    count = label.endswith(("syncs", "waits"))
    f, fd = (",.0f", "+,.0f") if count else (",.1f", "+,.1f")
    return ("<tr>" + _txt(label) + num_cell(va, f) + num_cell(vb, f)
            + num_cell(None if d is None else round(d, 3), fd) + "</tr>")


# ------------------------------------------------------------------------------- text parts
def headline_html(rep: Report, cmp: Comparison | None) -> str:
    """The finding first: the report's headline, or the comparison's verdict per rank."""
    if cmp is None:
        lines = [rep.headline()]
    else:
        lines = [f"rank {rc.rank}: {rc.verdict(cmp.label_a, cmp.label_b)}" for rc in cmp.ranks]
    return '<div id="headline">' + "".join(f"<p>{e(x)}</p>" for x in lines) + "</div>"


def warnings_html(runs: list[tuple[str, Report]]) -> str:
    """The input's warnings (truncated traces, skipped events: before the finding they
    qualify), then the run's; above them, profplug run's traced vs untraced steps."""
    items = [f"{label + ': ' if label else ''}{w}" for label, rep in runs
             for w in [*input_warnings(rep), *rep.warnings]]
    seen = [f"{label + ': ' if label else ''}{x}" for label, rep in runs
            if (x := meta_line(rep.meta))]  # profplug run: traced vs untraced steps
    out = "".join(f'<p class="sub observer">{e(x)}</p>' for x in seen)
    if not items:
        return out
    return out + '<ul id="warnings">' + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>"


def notes_html(runs: list[tuple[str, Report]]) -> str:
    items = []
    for label, rep in runs:
        for r in rep.ranks:
            who = row_label(label, r.rank)
            items += [f"{who}: other: {n} gap(s): {reason}"
                      for reason, n in r.other_reasons.items()]
            if not r.has_gpu_work:
                items.append(f"{who}: no GPU work in this rank's trace")
    if not items:
        return ""
    return "<h2>Notes</h2><ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>"


def json_section(title: str, doc: Any) -> str:
    """A section showing ``doc`` as escaped JSON (a run-level result without its own HTML)."""
    return f"<h2>{e(title)}</h2><pre>" + e(json.dumps(doc, indent=1, default=str)) + "</pre>"


def readable_time(key: str, v: Any) -> str | None:
    """A run.json time (epoch seconds under a time-like key) as a UTC date, else None."""
    if (key in EPOCH_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)
            and 1e9 <= v <= 1e10):
        when = datetime.fromtimestamp(v, tz=timezone.utc)
        return when.strftime("%Y-%m-%d %H:%M:%S UTC")
    return None


META_DEPTH = 16


def meta_html(d: dict[str, Any], depth: int = 0) -> str:
    """run.json as nested key/value tables; dates readable, lists of words on one line;
    tables nest at most META_DEPTH deep (deeper values are a note, not a RecursionError)."""
    if depth >= META_DEPTH:
        return '<span class="sub">(nested too deep to show)</span>'
    rows = []
    for k, v in d.items():
        if isinstance(v, dict):
            cell = meta_html(v, depth + 1) if v else "{}"
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            cell = "".join(meta_html(x, depth + 1) for x in v)
        elif isinstance(v, list) and all(isinstance(x, (str, int, float)) for x in v):
            cell = e(" ".join(map(str, v)))
        else:
            when = readable_time(k, v)
            try:
                text = v if isinstance(v, str) else json.dumps(v, default=str)
            except (RecursionError, ValueError):  # a list nested hundreds deep
                text = "(nested too deep to show)"
            cell = e(text) if when is None else f"{e(when)} <span class=\"sub\">({e(text)})</span>"
        rows.append(f'<tr><td class="t">{e(k)}</td><td class="t">{cell}</td></tr>')
    return f'<table class="meta"><tbody>{"".join(rows)}</tbody></table>'


def timeline_html(notes: list[str], parts: Sequence[str] = ("compute",)) -> str:
    """The timeline's frame; ``parts``: the GPU-time quantities it draws (the legend)."""
    legend = legend_html([*parts, *CAUSES])
    legend = legend[:-len("</div>")] + '<span class="key"><b class="tick"></b>step start</span>'
    return ('<h2>Timeline</h2><p class="sub">GPU time per rank and device in the colours of '
            "the page's other figures: compute, NCCL (transfer and peer wait where the "
            "cross-rank analysis ran), idle by cause. It opens on a few steps: drag the plot to pan, Ctrl+wheel to "
            "zoom, drag or resize the window in the strip below it to move along the whole "
            "run; hover an idle gap for its duration, sync API and call site, a peer wait for its "
            "duration.</p>"
            + "".join(f'<p class="note">{e(n)}</p>' for n in notes)
            + f'{legend}</div><div class="tl-tools">'
            '<button data-view="steps">a few steps</button><button data-view="all">whole '
            'window</button><button data-view="in">zoom in</button><button data-view="out">'
            'zoom out</button></div><div id="timeline" class="timeline"><canvas id="tl-main">'
            '</canvas><canvas id="tl-overview"></canvas><div id="tl-tip" hidden></div></div>')


# ------------------------------------------------------------------------------- entry
def render_html(rep: Report, out: TextIO, *, compare: Comparison | None = None,
                sections: Sequence[str] = (), top: Sequence[str] = (),
                lead: Sequence[str] = (), title: str | None = None) -> None:
    """Write the report (or, with ``compare``, both runs and the comparison) as one page.

    ``top``: HTML of run-level results shown right after the summary (the what-if);
    ``sections``: the other run-level results, after the notes; ``lead``: HTML that takes
    the headline's place (``compare A AB_DIR``: the answer), with the page's ``title``.
    """
    runs = _runs(rep, compare)
    tl, tl_notes = timeline_data(runs)
    n_ranks = sum(len(r.ranks) for _, r in runs)
    title = title or ("profplug compare: " + compare.label_a + " vs " + compare.label_b
                      if compare is not None else f"profplug {rep.command}")
    sources = sorted({r.source for _, x in runs for r in x.ranks})
    # warnings about the input come before the finding they qualify
    if compare is None:
        body = [f"<h1>{e(title)}</h1><p class=\"sub\">{n_ranks} rank"
                f"{'' if n_ranks == 1 else 's'} · {e('/'.join(sources) or '-')} · tolerance "
                f"{rep.options.tolerance_ns / 1000:g} us · times in us</p>" + _step_p(rep),
                warnings_html(runs), *(lead or [headline_html(rep, compare)])]
    else:  # the answer first, then the comparison per rank
        body = [f"<h1>{e(title)}</h1>", compare_header_html(compare), warnings_html(runs),
                answer_html(compare), compare_html(compare)]
    gpu = any(r.has_gpu_work for _, x in runs for r in x.ranks)
    if not gpu:  # a short page: what there is (the host-only section), notes, metadata
        body += [*top, notes_html(runs), *sections]
        body += [_meta(label, x) for label, x in runs if x.meta]
        _write(out, title, body, {"causes": list(CAUSES), "colors": dict(COLORS),
                                  "timeline": tl})
        return
    body.append("<h2>Per rank</h2><p class=\"sub\">step us: the median over a rank's "
                "steps, outlier steps left out</p>" + summary_html(runs))
    body.append(outliers_html(runs))
    body += top
    if tl["rows"]:
        body.append(timeline_html(tl_notes, tl["parts"]))
    svg = bars_svg(runs, COLORS)
    if svg:
        body.append('<h2>GPU window by cause</h2><p class="sub">compute + NCCL (split into '
                    "transfer and peer wait where the cross-rank analysis ran) + idle by "
                    "cause = the GPU window; the line under a bar is the stream wait (event "
                    "waits on the GPU), which overlaps them.</p>"
                    + legend_html([*used_parts(runs), "stream_wait"]) + svg)
    body.append('<h2>Costliest call sites</h2><p class="sub">click a header to sort</p>'
                + callsites_html(runs))
    body.append("<h2>Sync APIs</h2>" + syncs_html(runs))
    body.append(notes_html(runs))
    body += sections
    body += [_meta(label, x) for label, x in runs if x.meta]
    _write(out, title, body, {"causes": list(CAUSES), "colors": dict(COLORS), "timeline": tl})


def _step_p(rep: Report) -> str:
    """The run's step (``runstep``), under the title; nothing without GPU work."""
    step = run_step(rep.ranks)
    return "" if step["us"] is None else \
        f'<p class="sub" id="run-step">the run\'s step: {e(step_words(step))}</p>'


def _meta(label: str, rep: Report) -> str:
    return (f"<details class=\"meta\"><summary>Run metadata"
            f"{' · ' + e(label) if label else ''} (run.json)</summary>"
            + meta_html(rep.meta) + "</details>")


def _write(out: TextIO, title: str, body: list[str], data: dict[str, Any]) -> None:
    parts = {"TITLE": e(title), "BODY": "\n".join(b for b in body if b),
             "DATA": script_json(data), "APPJS": _template("report.js")}
    out.write(_MARK.sub(lambda m: parts[m.group(1)], _template("report.html")))
