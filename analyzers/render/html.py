"""Self-contained HTML report: plotly.js inlined once, no network, every trace string escaped.

Sections: comparison verdicts (with ``compare``), per-rank summary, a stacked bar of each
rank's GPU window (compute, comm, idle by cause; stream wait as a marker, since it overlaps
the rest), a timeline of busy spans and idle gaps per rank and device (one WebGL trace per
cause, never one per gap; at most ``MAX_GAPS_PER_ROW`` longest gaps per row are drawn and the
shorter ones count as busy, with a note), sortable call-site and sync-API tables, run
metadata. Times in us. Table cells carry the JSON report's value in ``data-v``.

Trace strings reach the page three ways: in HTML, through ``html.escape``; in the embedded
JSON, with ``<``, ``>``, ``&`` written as ``\\u003c`` etc. so nothing can close the
``<script>``; and every string plotly draws (run labels, row names, hover text) is
HTML-escaped first (``plot_text``), since plotly renders tags such as ``<a>`` in text.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict, is_dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from ..stalls import CAUSES

if TYPE_CHECKING:
    from ..compare import Comparison
    from ..report import Report
    from ..stalls import RankStalls

MAX_GAPS_PER_ROW = 5000
MAX_CALLSITES_PER_RANK = 200
COLORS = {"compute": "#4c78a8", "comm": "#72b7b2", "busy": "#4c78a8",
          "device_sync": "#e45756", "event_sync": "#f58518", "host_bound": "#b279a2",
          "other": "#9d9d9d", "stream_wait": "#54a24b"}
_MARK = re.compile(r"\{\{(\w+)\}\}")


def e(s: object) -> str:
    """HTML-escape any value (quotes too: safe in attributes)."""
    return html.escape(str(s), quote=True)


def plot_text(s: object) -> str:
    """A string for plotly (labels, ticks, hover text): plotly draws its own subset of HTML
    (``<a href>``, ``<span style>``, ``<br>``...) from text, so ``&``, ``<`` and ``>`` are
    written as entities; plotly shows them as the characters."""
    return html.escape(str(s), quote=False)


def script_json(doc: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and U+2028/9 escaped."""
    s = json.dumps(doc, allow_nan=False, separators=(",", ":"))
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text("utf-8")


def _runs(rep: Report, cmp: Comparison | None) -> list[tuple[str, Report]]:
    if cmp is None:
        return [("", rep)]
    return [(cmp.label_a, cmp.report_a), (cmp.label_b, cmp.report_b)]


def _row_label(label: str, rank: int) -> str:
    return f"{label} · rank {rank}" if label else f"rank {rank}"


# ------------------------------------------------------------------------------- plot data
def bars_data(runs: list[tuple[str, Report]]) -> dict[str, Any]:
    """Per rank: the GPU window split into compute, comm, idle by cause; stream wait (us)."""
    parts = ["compute", "comm", *CAUSES]
    d: dict[str, Any] = {"parts": parts, "rows": [], "stream_wait": []}
    for p in parts:
        d[p] = []
    for label, rep in runs:
        for r in rep.ranks:
            if not r.has_gpu_work:
                continue
            d["rows"].append(plot_text(_row_label(label, r.rank)))
            d["compute"].append(round(r.total("compute_us"), 3))
            d["comm"].append(round(r.total("comm_us"), 3))
            for c, v in r.idle_by_cause_us().items():
                d[c].append(round(v, 3))
            d["stream_wait"].append(round(r.stream_wait_us, 3))
    return d


class _Strings:
    """A string registry: call-site/API names repeated thousands of times are sent once."""

    def __init__(self) -> None:
        self.items: list[str] = [""]
        self.ids: dict[str, int] = {"": 0}

    def id(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.items)
            self.items.append(s)
        return self.ids[s]


def timeline_data(runs: list[tuple[str, Report]], max_gaps: int = MAX_GAPS_PER_ROW
                  ) -> tuple[dict[str, Any], list[str]]:
    """Busy spans and gaps per (run, rank, device) row, in us since each run's first GPU op.

    Returns the plot data and notes (one per row where gaps were left out).
    """
    strings = _Strings()
    rows: list[str] = []
    notes: list[str] = []
    busy: dict[str, list[float]] = {"s": [], "e": [], "y": []}
    gaps: dict[str, dict[str, list[Any]]] = {
        c: {"s": [], "e": [], "y": [], "api": [], "site": []} for c in CAUSES}
    for label, rep in runs:
        starts = [w[0] for r in rep.ranks for w in r.windows_ns.values()]
        if not starts:
            continue
        origin = min(starts)
        for r in rep.ranks:
            api_ids = [strings.id(a) for a in r.call_api]
            site_ids = [strings.id(s) for s in r.call_site]
            for dev, (ws, we) in sorted(r.windows_ns.items()):
                y = len(rows)
                rows.append(plot_text(f"{_row_label(label, r.rank)} gpu {dev}"))
                note = _row(r, dev, ws, we, origin, y, max_gaps, busy, gaps, api_ids,
                            site_ids)
                if note:
                    notes.append(f"{rows[-1]}: {note}")
    return {"rows": rows, "strings": [plot_text(x) for x in strings.items], "busy": busy,
            "gaps": gaps}, notes


def _row(r: RankStalls, dev: int, ws: int, we: int, origin: int, y: int, max_gaps: int,
         busy: dict[str, list[float]], gaps: dict[str, dict[str, list[Any]]],
         api_ids: list[int], site_ids: list[int]) -> str:
    g = r.gaps
    sel = np.nonzero(g.device == dev)[0]
    note = ""
    if sel.size > max_gaps:
        dur = (g.end_ns - g.start_ns)[sel]
        keep = np.argsort(-dur, kind="stable")[:max_gaps]
        left = np.setdiff1d(np.arange(sel.size), keep)
        note = (f"drew the {max_gaps:,} longest of {sel.size:,} gaps; the other "
                f"{left.size:,} ({float(dur[left].sum()) / 1000:,.1f} us, each <= "
                f"{float(dur[left].max()) / 1000:,.3f} us) are drawn as busy")
        sel = sel[np.sort(keep)]
    sel = sel[np.argsort(g.start_ns[sel], kind="stable")]
    gs, ge = g.start_ns[sel], g.end_ns[sel]

    def us(a: np.ndarray) -> list[float]:
        return np.round((a - origin) / 1000.0, 3).tolist()

    bs = np.concatenate(([ws], ge))
    be = np.concatenate((gs, [we]))
    busy["s"] += us(bs)
    busy["e"] += us(be)
    busy["y"] += [y] * int(bs.size)
    for k, c in enumerate(CAUSES):
        m = g.cause[sel] == k
        if not m.any():
            continue
        call = g.call[sel][m]
        d = gaps[c]
        d["s"] += us(gs[m])
        d["e"] += us(ge[m])
        d["y"] += [y] * int(m.sum())
        d["api"] += [api_ids[i] if i >= 0 else 0 for i in call.tolist()]
        d["site"] += [site_ids[i] if i >= 0 else 0 for i in call.tolist()]
    return note


# ------------------------------------------------------------------------------- HTML parts
def _num(v: float | int | None, fmt: str = ",.1f") -> str:
    """A table cell holding the exact value in ``data-v`` and a rounded display."""
    if v is None:
        return '<td data-v="">-</td>'
    return f'<td data-v="{json.dumps(v)}">{format(v, fmt)}</td>'


def _txt(s: object) -> str:
    return f'<td class="t" data-v="{e(s)}">{e(s)}</td>'


def _table(cls: str, head: list[str], rows: list[str], tid: str, ntext: int = 3) -> str:
    th = "".join(f'<th class="t">{e(h)}</th>' if i < ntext else f"<th>{e(h)}</th>"
                 for i, h in enumerate(head))
    return (f'<table class="{cls}" id="{tid}"><thead><tr>{th}</tr></thead><tbody>'
            + "".join(r if r.startswith("<tr") else f"<tr>{r}</tr>" for r in rows)
            + "</tbody></table>")


def summary_html(runs: list[tuple[str, Report]]) -> str:
    head = ["run", "rank", "source", "window us", "step us", "busy us", "compute us",
            "comm us", "idle us", *(f"{c} us" for c in CAUSES), "stream wait us"]
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            step = r.steps.period_us if r.steps and r.steps.n_steps else None
            ic = r.idle_by_cause_us()
            cells = [_txt(label or "-"), _txt(r.rank), _txt(r.source),
                     _num(round(r.total("window_us"), 3)), _num(step),
                     *(_num(round(r.total(k), 3)) for k in
                       ("busy_us", "compute_us", "comm_us", "idle_us")),
                     *(_num(round(ic[c], 3)) for c in CAUSES), _num(round(r.stream_wait_us, 3))]
            rows.append(f'<tr data-rank="{r.rank}" data-run="{e(label)}">' + "".join(cells)
                        + "</tr>")
    return _table("sortable", head, rows, "summary")


def callsites_html(runs: list[tuple[str, Report]]) -> str:
    head = ["run", "rank", "call site", "API", "count", "idle caused us", "idle / step us",
            "host blocked us"]
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            for c in r.callsites[:MAX_CALLSITES_PER_RANK]:
                rows.append("".join([_txt(label or "-"), _num(r.rank, "d"), _txt(c.callsite),
                                     _txt(c.api), _num(c.count, ",d"), _num(c.idle_caused_us),
                                     _num(c.idle_per_step_us), _num(c.host_blocked_us)]))
    return _table("sortable", head, rows, "callsites", 4)


def syncs_html(runs: list[tuple[str, Report]]) -> str:
    head = ["run", "rank", "sync API", "kind", "count", "host blocked us", "p50 us",
            "p99 us", "idle caused us"]
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            for s in r.syncs:
                rows.append("".join([_txt(label or "-"), _num(r.rank, "d"), _txt(s.api),
                                     _txt(s.kind), _num(s.count, ",d"),
                                     _num(s.host_blocked_us), _num(s.host_blocked_p50_us),
                                     _num(s.host_blocked_p99_us), _num(s.idle_caused_us)]))
    return _table("sortable", head, rows, "syncs", 4)


def compare_html(cmp: Comparison) -> str:
    from .compare_table import _rows

    out = ['<h2>Comparison</h2><p class="sub">A = <b>' + e(cmp.label_a) + "</b>, B = <b>"
           + e(cmp.label_b) + "</b>; delta = B - A; idle by cause per step when both runs "
           "have steps. share = device_sync idle per step of the slower run / step-time "
           "difference.</p>"]
    rows = [f'<tr data-rank="{rc.rank}">' + _num(rc.rank, "d")
            + f'<td class="t faster">{e(rc.verdict(cmp.label_a, cmp.label_b))}</td>'
            + _num(rc.diff_us) + _num(rc.diff_pct) + _num(rc.device_sync_share, ".2f")
            + "</tr>" for rc in cmp.ranks]
    out.append('<table id="verdicts"><thead><tr><th>rank</th><th class="t">verdict</th>'
               "<th>diff us/step</th><th>diff %</th><th>share</th></tr></thead><tbody>"
               + "".join(rows) + "</tbody></table>")
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
    return ("<tr>" + _txt(label) + _num(va, f) + _num(vb, f)
            + _num(None if d is None else round(d, 3), fd) + "</tr>")


def _kv_table(d: dict[str, Any]) -> str:
    rows = "".join(f'<tr><td class="t">{e(k)}</td><td class="t">'
                   f"{e(v if isinstance(v, str) else json.dumps(v, default=str))}</td></tr>"
                   for k, v in d.items())
    return f'<table class="meta"><tbody>{rows}</tbody></table>'


def notes_html(runs: list[tuple[str, Report]]) -> str:
    items = []
    for label, rep in runs:
        for r in rep.ranks:
            who = _row_label(label, r.rank)
            items += [f"{who}: other: {n} gap(s): {reason}"
                      for reason, n in r.other_reasons.items()]
            items += [f"{who}: warning: {w}" for w in r.warnings]
            if r.skipped:
                items.append(f"{who}: skipped events: "
                             + ", ".join(f"{k}: {v}" for k, v in r.skipped.items()))
            if not r.has_gpu_work:
                items.append(f"{who}: no GPU work in this rank's trace")
    if not items:
        return ""
    return "<h2>Notes</h2><ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>"


def whatif_html(whatif: Any) -> str:
    """A what-if result's own section when it is one, else the object as escaped JSON."""
    from ..whatif.result import WhatIfResult, whatif_html_section

    if isinstance(whatif, WhatIfResult):
        return whatif_html_section(whatif)
    if hasattr(whatif, "to_dict"):
        doc = whatif.to_dict()
    elif is_dataclass(whatif) and not isinstance(whatif, type):
        doc = asdict(whatif)
    else:
        doc = whatif
    return "<h2>What if</h2><pre>" + e(json.dumps(doc, indent=1, default=str)) + "</pre>"


# ------------------------------------------------------------------------------- entry
def render_html(rep: Report, out: TextIO, *, compare: Comparison | None = None,
                whatif: Any = None) -> None:
    """Write the report (or, with ``compare``, both runs and the comparison) as one page."""
    from plotly.offline import get_plotlyjs

    runs = _runs(rep, compare)
    tl, tl_notes = timeline_data(runs)
    n_ranks = sum(len(r.ranks) for _, r in runs)
    title = ("profplug compare: " + compare.label_a + " vs " + compare.label_b
             if compare is not None else "profplug stall report")
    sources = sorted({r.source for _, x in runs for r in x.ranks})
    body = [f"<h1>{e(title)}</h1><p class=\"sub\">{n_ranks} rank(s) · "
            f"{e('/'.join(sources) or '-')} · tolerance {rep.options.tolerance_ns / 1000:g} us"
            " · times in us</p>"]
    if compare is not None:
        body.append(compare_html(compare))
    body.append("<h2>Per rank</h2>" + summary_html(runs))
    body.append('<h2>GPU window by cause</h2><p class="sub">compute + comm + idle by cause '
                "= the GPU window; stream wait (event waits on the GPU) overlaps them.</p>"
                '<div id="plot-bars" class="plot"></div>')
    body.append('<h2>Timeline</h2><p class="sub">GPU busy spans and idle gaps per rank and '
                "device, coloured by cause; hover a gap's marker for its duration, sync API "
                "and call site.</p>")
    body += [f'<p class="note">{e(n)}</p>' for n in tl_notes]
    body.append('<div id="plot-timeline" class="plot"></div>')
    body.append('<h2>Costliest call sites</h2><p class="sub">click a header to sort</p>'
                + callsites_html(runs))
    body.append("<h2>Sync APIs</h2>" + syncs_html(runs))
    body.append(notes_html(runs))
    if whatif is not None:
        body.append(whatif_html(whatif))
    for label, x in runs:
        if x.meta:
            body.append(f"<h2>Run metadata{' · ' + e(label) if label else ''}</h2>"
                        + _kv_table(x.meta))
    data = {"causes": list(CAUSES), "colors": COLORS, "bars": bars_data(runs), "timeline": tl}
    parts = {"TITLE": e(title), "BODY": "\n".join(body), "DATA": script_json(data),
             "PLOTLYJS": get_plotlyjs(), "APPJS": _template("report.js")}
    out.write(_MARK.sub(lambda m: parts[m.group(1)], _template("report.html")))
