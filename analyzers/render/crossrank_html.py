"""The cross-rank analysis as an HTML ``<section>`` (no script): bubble table, swimlane,
launch queue, critical path, drain. The report page embeds it (registry ``TOP_SECTIONS``:
right after the what-if); its plots are inline SVG (``crossrank_svg``), as the page's GPU
window bars. Trace strings reach the HTML through ``escape.e`` only.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TextIO

from profplug.analyzers.render.crossrank_svg import lead_svg, queue_svg, rank_legend, swimlane_svg
from profplug.analyzers.render.escape import e as _e
from profplug.analyzers.render.palette import COLORS, legend_html
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.steps import stats

if TYPE_CHECKING:
    from profplug.analyzers.crossrank.result import CrossRankResult

XR_COLORS = MappingProxyType({k: COLORS[k] for k in ("compute", "transfer", "peer_wait", "comm_unmatched",
                                                     *CAUSES, "handoff", "path")})
SWIM_KEYS = ("compute", "transfer", "peer_wait", "comm_unmatched", *CAUSES)


def _td(v: Any, fmt: str = ",.1f") -> str:
    if v is None:
        return "<td>-</td>"
    if isinstance(v, (int, float)):
        return f'<td data-v="{v}">{format(v, fmt)}</td>'
    return f'<td class="t">{_e(v)}</td>'


def _bubbles(res: CrossRankResult) -> str:
    head = ["rank", "window us", "comm us", "transfer us", "peer wait us", "idle us",
            "bubble us", "bubble %", "bubble / step us", "waits for (us)", "matched by"]
    rows = []
    for b in res.bubbles:
        per = None
        if b.steps is not None and b.steps.step_numbers:
            per = round(stats.center(b.steps.bubble_ns) / 1000, 3)
        waits = ", ".join(f"rank {r}: {v / 1000:,.1f}" for r, v in b.waits_for_ns.items())
        pct = round(100.0 * b.bubble_ns / b.window_ns, 2) if b.window_ns else None
        rows.append(f'<tr data-rank="{b.rank}">' + "".join([
            _td(b.rank, "d"), *(_td(round(x / 1000, 3)) for x in (
                b.window_ns, b.comm_ns, b.transfer_ns, b.wait_ns, b.idle_ns, b.bubble_ns)),
            _td(pct, ".1f"), _td(per), _td(waits or "-"), _td(b.match_rule)]) + "</tr>")
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (f'<table class="sortable xr-bubbles"><thead><tr>{th}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _critical(res: CrossRankResult) -> str:
    cp = res.critical_path
    cats = "".join(f"<tr><td class=\"t\">{_e(k)}</td>{_td(round(100 * v, 2), '.1f')}</tr>"
                   for k, v in cp.by_category.items())
    ranks = "".join(f"<tr><td class=\"t\">rank {_e(k)}</td>{_td(round(100 * v, 2), '.1f')}"
                    "</tr>" for k, v in cp.by_rank.items())
    sites = "".join(
        f"<tr>{_td(t['rank'], 'd')}{_td(t['category'])}{_td(t['callsite'])}"
        f"{_td(round(100 * t['share'], 2), '.1f')}{_td(t['steps'], 'd')}</tr>"
        for t in cp.top_callsites)
    what = f"{cp.n_steps} step(s)" if cp.basis == "step" else "the GPU window"
    return (f"<h3>Critical path</h3><p class=\"sub\">Over {what}, {cp.length_us:,.1f} us in "
            f"all: {_e(cp.definition)}. Shares in % of the path.</p>"
            '<div style="display:flex;gap:2em;flex-wrap:wrap">'
            f'<table class="xr-cat"><thead><tr><th>category</th><th>%</th></tr></thead>'
            f"<tbody>{cats}</tbody></table>"
            f'<table class="xr-rank"><thead><tr><th>rank</th><th>%</th></tr></thead>'
            f"<tbody>{ranks}</tbody></table>"
            '<table class="xr-sites"><thead><tr><th>rank</th><th>category</th>'
            "<th>call site</th><th>%</th><th>steps</th></tr></thead>"
            f"<tbody>{sites}</tbody></table></div>")


def _drain(res: CrossRankResult) -> str:
    rows = "".join(
        f"<tr>{_td(d.rank, 'd')}"
        f"{_td(None if d.lead_p50_ns is None else round(d.lead_p50_ns / 1000, 3))}"
        f"{_td(round(d.depth_mean, 3), '.2f')}"
        f"{_td(round(100.0 * d.empty_ns / d.window_ns, 2) if d.window_ns else None, '.1f')}"
        "</tr>" for d in res.drains)
    return ('<table class="xr-drain"><thead><tr><th>rank</th><th>median host lead us</th>'
            "<th>mean queue depth</th><th>queue empty %</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _lanes(res: CrossRankResult) -> str:
    sw = res.swimlane
    if sw is None:
        return ""
    steps = ("Steps " + ", ".join(str(s) for s in sw.steps)
             if sw.steps and None not in sw.steps else "The GPU window (no step markers)")
    keys = legend_html([*SWIM_KEYS, "handoff", "path"],
                       {**{c: f"idle: {c.replace('_', ' ')}" for c in CAUSES},
                        "handoff": "send \u2192 recv"})
    return ("<h3>Swimlane</h3><p class=\"sub\">" + _e(steps) + " on one time axis "
            "(us, aligned clocks): GPU ops as compute, NCCL transfer and peer wait, idle gaps "
            "by cause (each pixel shows what covers most of it); thin lines: matched send "
            "&rarr; recv hand-offs; black, above a row: the critical path; dashed: step "
            "starts. Hover a part for its name.</p>" + keys + swimlane_svg(sw, XR_COLORS)
            + "<h3>Launch queue</h3><p class=\"sub\">GPU ops launched but not finished, per "
            "rank, over the same steps (the most per pixel): a device-wide synchronize "
            "empties it.</p>" + rank_legend(sw.rows) + queue_svg(sw))


def render_crossrank_html(res: CrossRankResult, out: TextIO) -> None:
    """Write the cross-rank section (tables and inline SVG plots; no script)."""
    sw = res.swimlane
    notes = "".join(f"<li>{_e(n)}</li>" for n in sw.notes) if sw is not None else ""
    msgs = "".join(f"<li>note: {_e(n)}</li>" for n in res.notes) + "".join(
        f"<li>warning: {_e(w)}</li>" for w in res.warnings)
    m = res.matching
    rules = ", ".join(f"{_e(k)} ({_e(v)})" for k, v in m["rules"].items()) or "none"
    lead = lead_svg(res)
    out.write(
        '<section class="crossrank"><h2>Across ranks: bubbles, critical path, '
        "drain</h2>"
        f"<p class=\"sub\">{_e(m['p2p_pairs'])} send/recv pair(s) and {_e(m['collectives'])} "
        f"collective(s) matched by: {rules}; clocks: {_e(m['clock']['rule'])}. "
        "bubble = idle + NCCL peer wait (a NCCL kernel's time before its peer's matching "
        "kernel started).</p>" + _bubbles(res) + _lanes(res) + _critical(res)
        + "<h3>Drain</h3><p class=\"sub\">Host lead: launch &rarr; start of each GPU op "
        "(median per step, us); it collapses after a device-wide synchronize, event waits "
        f"keep it up.</p>{_drain(res)}"
        + (rank_legend([f"rank {d.rank}" for d in res.drains]) + lead if lead else "")
        + (f"<ul>{notes}{msgs}</ul>" if notes or msgs else "")
        + "</section>")
