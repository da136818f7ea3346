"""Each rank's GPU window split by cause, as an inline SVG (no script): one horizontal
stacked bar per rank (compute, comm, idle by cause, adding up to the window) and a line
below it for the stream-wait time (event waits on the GPU; it overlaps the other parts).
Hovering a part shows its value (``<title>``). Times in us.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from profplug.analyzers.core.analysis_spec import AddsRankFields
from profplug.analyzers.crossrank.result import CrossRankResult
from profplug.analyzers.render.escape import e
from profplug.analyzers.stalls.gaps import CAUSES

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import Report

PARTS = ("compute", "comm", "transfer", "peer_wait", *CAUSES)  # comm, or its split
LABEL_W, BAR_W, PCT_W, ROW_H, BAR_H = 170, 600, 170, 34, 18


def _comm_parts(rep: Report, rank: int, comm_us: float) -> dict[str, float]:
    """NCCL time as ``comm``, or, where the cross-rank analysis split it, as ``transfer`` and
    ``peer_wait`` (the same quantities, in the same colours, as in the swimlane)."""
    xr = rep.run.get(CrossRankResult.key)
    try:
        wait = float(xr.rank_fields(rank)["comm_wait_us"]) \
            if isinstance(xr, AddsRankFields) else None
    except (KeyError, TypeError):
        wait = None
    if wait is None or comm_us <= 0:
        return {"comm": comm_us}
    wait = min(wait, comm_us)
    return {"transfer": round(comm_us - wait, 3), "peer_wait": round(wait, 3)}


def used_parts(runs: list[tuple[str, Report]]) -> list[str]:
    """The parts some bar shows (in bar order), for the legend."""
    seen = {k for _, parts, _ in bars_data(runs) for k, v in parts.items() if v > 0}
    return [p for p in PARTS if p in seen]


def bars_data(runs: list[tuple[str, Report]]) -> list[tuple[str, dict[str, float], float]]:
    """(row label, part -> us, stream wait us) per rank with GPU work."""
    rows = []
    for label, rep in runs:
        for r in rep.ranks:
            if not r.has_gpu_work:
                continue
            gpu = r.gpu_time()
            parts = {"compute": gpu.compute_us, **_comm_parts(rep, r.rank, gpu.comm_us),
                     **{c: round(v, 3) for c, v in r.idle_by_cause_us().items()}}
            name = f"{label} · rank {r.rank}" if label else f"rank {r.rank}"
            rows.append((name, parts, round(r.stream_wait_us, 3)))
    return rows


def bars_svg(runs: list[tuple[str, Report]], colors: Mapping[str, str]) -> str:
    """The SVG; empty when no rank has GPU work."""
    rows = bars_data(runs)
    if not rows:
        return ""
    top = max(sum(p.values()) for _, p, _ in rows) or 1.0
    width = LABEL_W + BAR_W + PCT_W
    out = [f'<svg id="bars" class="bars" viewBox="0 0 {width} {ROW_H * len(rows) + 8}" '
           f'width="{width}" role="img" aria-label="GPU window by cause per rank" '
           'shape-rendering="crispEdges">']
    for i, (name, parts, wait) in enumerate(rows):
        y = 4 + i * ROW_H
        win = sum(parts.values())
        out.append(f'<text x="{LABEL_W - 8}" y="{y + BAR_H - 4}" text-anchor="end">'
                   f"{e(name)}</text>")
        x = float(LABEL_W)
        for p in PARTS:
            if p not in parts:
                continue
            w = BAR_W * parts[p] / top
            if w > 0:
                share = 100.0 * parts[p] / win if win else 0.0
                out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{BAR_H}" '
                           f'fill="{colors[p]}" data-part="{p}"><title>{e(name)}: {p} '
                           f"{parts[p]:,.1f} us ({share:.1f}%)</title></rect>")
            x += w
        idle = win - sum(parts.get(k, 0.0) for k in ("compute", "comm", "transfer",
                                                     "peer_wait"))
        out.append(f'<text x="{x + 6:.2f}" y="{y + BAR_H - 4}">{win:,.0f} us, '
                   f"idle {100.0 * idle / win if win else 0.0:.0f}%</text>")
        if wait > 0:
            out.append(f'<rect x="{LABEL_W}" y="{y + BAR_H + 3}" width="'
                       f'{max(BAR_W * wait / top, 1.0):.2f}" height="4" '
                       f'fill="{colors["stream_wait"]}"><title>{e(name)}: stream wait '
                       f"{wait:,.1f} us (overlaps the parts above)</title></rect>")
    out.append("</svg>")
    return "".join(out)
