"""The cross-rank section's plots as inline SVG (no script, no plotting library), as the
page's ``bars_svg``: the swimlane (a few steps, every rank on one aligned time axis), the
launch-queue depth over the same steps, and the median host lead per step.

Each plot is drawn at pixel resolution, so its size is bounded whatever the trace: a
swimlane row holds at most one rectangle per pixel column (the part that covers most of
that column: compute, NCCL transfer, peer wait, unmatched NCCL, idle by cause), a queue line
one step per column, a lead line one point per column. The plot width shrinks with the rank
count (``PLOT_CELLS`` columns in all). Hovering a part shows its name (``<title>``). Text
from the trace reaches the SVG through ``escape.e`` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from profplug.analyzers.render.escape import e
from profplug.analyzers.render.palette import rank_style
from profplug.analyzers.steps.stats import outlier_mask

if TYPE_CHECKING:
    from profplug.analyzers.crossrank.result import CrossRankResult
    from profplug.analyzers.crossrank.swimlane import Swimlane

LABEL_W, ROW_H, BAR_H, AXIS_H, TOP = 80, 24, 14, 26, 18
MAX_W, MIN_W = 900, 240
PLOT_CELLS = 36_000  # pixel columns of all rows of one plot together
MAX_LINES = 4_000  # hand-offs and critical-path segments drawn at most


def plot_width(rows: int) -> int:
    """Pixel width of a plot with ``rows`` rows (``PLOT_CELLS`` columns in all)."""
    return int(max(MIN_W, min(MAX_W, PLOT_CELLS // max(rows, 1))))


def coverage(s: np.ndarray, e_: np.ndarray, width: int) -> np.ndarray:
    """How much of each pixel column [j, j+1) the segments [s, e) cover (px, summed)."""
    s = np.clip(np.asarray(s, dtype=np.float64), 0, width)
    z = np.clip(np.asarray(e_, dtype=np.float64), 0, width)
    z = np.maximum(z, s)
    edges = np.arange(width + 1, dtype=np.float64)

    def below(x: np.ndarray) -> np.ndarray:  # sum over segments of max(edge - x, 0)
        xs = np.sort(x)
        csum = np.concatenate([[0.0], np.cumsum(xs)])
        n = np.searchsorted(xs, edges, side="left")
        below_edges: np.ndarray = n * edges - csum[n]
        return below_edges

    return np.diff(below(s) - below(z))


def dominant(parts: dict[str, tuple[np.ndarray, np.ndarray]], width: int) -> np.ndarray:
    """Per pixel column, the index (into ``parts``) of the part that covers most of it, -1
    where none covers it."""
    cov = np.stack([coverage(s, z, width) for s, z in parts.values()]) if parts else \
        np.zeros((0, width))
    if cov.size == 0:
        return np.full(width, -1, dtype=np.int64)
    best: np.ndarray = np.argmax(cov, axis=0)
    best[cov.max(axis=0) <= 1e-9] = -1
    return best


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of each run of True in ``mask``."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, ends = np.nonzero(d == 1)[0], np.nonzero(d == -1)[0]
    return list(zip(starts.tolist(), (ends - starts).tolist(), strict=True))


def _ticks(hi: float, width: int) -> list[tuple[float, str]]:
    """Nice axis ticks on [0, hi] (us), as (px, label)."""
    if hi <= 0:
        return [(0.0, "0")]
    raw = hi / max(2, width // 120)
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if step * m >= raw)
    out, v = [], 0.0
    while v <= hi * 1.0001:
        out.append((LABEL_W + v / hi * width, f"{v:,.0f}" if step >= 1 else f"{v:g}"))
        v += step
    return out


def _axis(y: float, hi: float, width: int, unit: str) -> str:
    parts = [f'<line x1="{LABEL_W}" y1="{y}" x2="{LABEL_W + width}" y2="{y}" stroke="#999"/>']
    for x, label in _ticks(hi, width):
        parts.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#999"/>'
                     f'<text x="{x:.1f}" y="{y + 15}" text-anchor="middle">{e(label)}</text>')
    parts.append(f'<text x="{LABEL_W + width}" y="{y + AXIS_H - 1}" text-anchor="end">'
                 f"{e(unit)}</text>")
    return "".join(parts)


def _open(cls: str, label: str, width: int, height: int) -> str:
    full = LABEL_W + width + 12
    return (f'<svg class="xr-plot {cls}" viewBox="0 0 {full} {height}" width="{full}" '
            f'role="img" aria-label="{e(label)}">')


def legend(items: Sequence[tuple[str, str]]) -> str:
    """An HTML legend (the page's ``.legend`` style) of identities (ranks, policies):
    (colour, name) pairs; quantities take ``palette.legend_html``."""
    keys = "".join(f'<span class="key" data-id="{e(n)}"><i style="background:{e(c)}"></i>'
                   f"{e(n)}</span>" for c, n in items)
    return f'<div class="legend">{keys}</div>'


def rank_legend(names: Sequence[str]) -> str:
    """The ranks' legend: each rank's line (colour and dash, ``palette.rank_style``)."""
    keys = []
    for i, n in enumerate(names):
        c, dash = rank_style(i)
        keys.append(f'<span class="key" data-id="{e(n)}" data-color="{c}"><svg width="18" '
                    f'height="8" style="margin-right:4px"><line x1="0" y1="4" x2="18" y2="4" '
                    f'stroke="{c}" stroke-width="3" stroke-dasharray="{dash}"/></svg>'
                    f"{e(n)}</span>")
    return f'<div class="legend">{"".join(keys)}</div>'


# ------------------------------------------------------------------------------ swimlane
def swimlane_svg(sw: Swimlane, colors: Mapping[str, str]) -> str:
    """The swimlane of ``sw`` (see the module docstring)."""
    n = len(sw.rows)
    width = plot_width(n)
    hi = float(sw.bounds_us[-1]) if sw.bounds_us else 0.0
    scale = width / hi if hi > 0 else 0.0
    height = TOP + n * ROW_H + AXIS_H
    out = [_open("xr-swim", "swimlane: GPU work, NCCL transfer and peer wait, idle by cause "
                 "per rank", width, height)]
    parts = {**sw.ops, **{f"idle: {c}": v for c, v in sw.gaps.items()}}
    names = list(parts)
    paths: dict[int, list[str]] = {k: [] for k in range(len(names))}
    for row in range(n):
        sel = {}
        for name in names:
            d = parts[name]
            y = np.asarray(d["y"], dtype=np.int64)
            m = y == row
            sel[name] = (np.asarray(d["s"], dtype=np.float64)[m] * scale,
                         np.asarray(d["e"], dtype=np.float64)[m] * scale)
        best = dominant(sel, width)
        y0 = TOP + row * ROW_H + (ROW_H - BAR_H) // 2
        for k in range(len(names)):
            paths[k] += [f"M{LABEL_W + x} {y0}h{w}v{BAR_H}h-{w}z" for x, w in runs(best == k)]
        out.append(f'<text x="{LABEL_W - 6}" y="{y0 + BAR_H - 3}" text-anchor="end">'
                   f"{e(sw.rows[row])}</text>")
    for k, name in enumerate(names):
        if paths[k]:
            key = name.removeprefix("idle: ")
            out.append(f'<path d="{"".join(paths[k])}" fill="{e(colors.get(key, "#999"))}" '
                       f'data-part="{e(key)}"><title>{e(name.replace("_", " "))}</title></path>')
    for i, b in enumerate(sw.bounds_us[:-1]):
        x = LABEL_W + b * scale
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{TOP + n * ROW_H}" '
                   'stroke="#888" stroke-dasharray="4 3"/>')
        step = sw.steps[i] if i < len(sw.steps) else None
        if step is not None:
            out.append(f'<text x="{x + 3:.1f}" y="{TOP - 6}">step {e(step)}</text>')
    out.append(_handoffs(sw, scale, colors.get("handoff", "#222")))
    out.append(_path(sw, scale, colors.get("path", "#000")))
    out.append(_axis(TOP + n * ROW_H + 2, hi, width, "us"))
    out.append("</svg>")
    return "".join(out)


def _row_mid(row: int) -> float:
    return TOP + row * ROW_H + ROW_H / 2


def _handoffs(sw: Swimlane, scale: float, color: str) -> str:
    h = sw.handoffs
    x0, y0, x1, y1 = (h.get(k, []) for k in ("x0", "y0", "x1", "y1"))
    segs = [f"M{LABEL_W + a * scale:.1f} {_row_mid(int(b)):.1f}L{LABEL_W + c * scale:.1f} "
            f"{_row_mid(int(d)):.1f}"
            for a, b, c, d in list(zip(x0, y0, x1, y1, strict=True))[:MAX_LINES]]
    if not segs:
        return ""
    return (f'<path class="xr-handoff" d="{"".join(segs)}" stroke="{e(color)}" '
            'stroke-width="1" fill="none"><title>send &#8594; recv hand-off</title></path>')


def _path(sw: Swimlane, scale: float, color: str) -> str:
    p = sw.path
    items = list(zip(p.get("s", []), p.get("e", []), p.get("y", []), p.get("cat", []),
                     strict=True))
    out = []
    for s, z, row, cat in items[:MAX_LINES]:
        y = TOP + int(row) * ROW_H + 2
        out.append(f'<line x1="{LABEL_W + s * scale:.1f}" y1="{y}" '
                   f'x2="{LABEL_W + max(z, s) * scale + 0.5:.1f}" y2="{y}" stroke="{e(color)}" '
                   f'stroke-width="3"><title>critical path: {e(cat)} {z - s:,.1f} us'
                   "</title></line>")
    return f'<g class="xr-path">{"".join(out)}</g>' if out else ""


# ------------------------------------------------------------------------------ queue
def step_max(t: np.ndarray, depth: np.ndarray, width: int) -> np.ndarray:
    """Per pixel column, the largest value of the step function (``depth[i]`` from
    ``t[i]`` on, ``t`` in px, sorted) over that column; 0 before the first point."""
    cols = np.arange(width)
    out = np.zeros(width, dtype=np.float64)
    if t.size == 0:
        return out
    col = np.clip(np.floor(t).astype(np.int64), 0, width - 1)
    np.maximum.at(out, col, depth)
    before = np.searchsorted(t, cols, side="right") - 1  # the value entering column j
    carry = np.where(before >= 0, depth[np.maximum(before, 0)], 0)
    return np.maximum(out, carry)


def queue_svg(sw: Swimlane) -> str:
    """Launch-queue depth per rank over the swimlane's steps (one line per rank)."""
    n = len(sw.rows)
    width = plot_width(n)
    hi = float(sw.bounds_us[-1]) if sw.bounds_us else 0.0
    scale = width / hi if hi > 0 else 0.0
    plot_h = 140
    height = TOP + plot_h + AXIS_H
    cols = [step_max(np.asarray(q["t"], dtype=np.float64) * scale,
                     np.asarray(q["depth"], dtype=np.float64), width) for q in sw.queue]
    top = max([float(c.max()) for c in cols if c.size] + [1.0])
    out = [_open("xr-queue", "launch-queue depth per rank", width, height),
           f'<text x="{LABEL_W - 6}" y="{TOP + 4}" text-anchor="end">{top:,.0f}</text>'
           f'<text x="{LABEL_W - 6}" y="{TOP + plot_h}" text-anchor="end">0</text>'
           f'<line x1="{LABEL_W}" y1="{TOP}" x2="{LABEL_W}" y2="{TOP + plot_h}" stroke="#999"/>']
    for i, c in enumerate(cols):
        ys = TOP + plot_h - c / top * plot_h
        d = [f"M{LABEL_W} {ys[0]:.1f}"]
        for j in range(1, width):
            if ys[j] != ys[j - 1]:
                d.append(f"H{LABEL_W + j}V{ys[j]:.1f}")
        d.append(f"H{LABEL_W + width}")
        color, dash = rank_style(i)
        out.append(f'<path d="{"".join(d)}" stroke="{color}" stroke-dasharray="{dash}" '
                   f'stroke-width="1.5" fill="none"><title>{e(sw.rows[i])}: GPU ops queued'
                   "</title></path>")
    out.append(_axis(TOP + plot_h + 2, hi, width, "us"))
    out.append("</svg>")
    return "".join(out)


# ------------------------------------------------------------------------------ lead
def inlier_top(series: Sequence[Sequence[float | None]]) -> float:
    """The largest value over the series that is not an outlier of its own series
    (``steps.stats.outlier_mask``); 1.0 at least."""
    top = 1.0
    for v in series:
        x = np.asarray([a for a in v if a is not None], dtype=np.float64)
        if x.size:
            top = max(top, float(x[~outlier_mask(x)].max(initial=0.0)))
    return top


def lead_svg(res: CrossRankResult) -> str:
    """Median host lead (launch -> start of each GPU op) per step, one line per rank; the
    axis spans the steps that are not outliers, an outlier step is drawn at the top edge,
    marked with its value."""
    series = [(f"rank {d.rank}", [None if x is None else x / 1000.0
                                  for x in d.steps_lead_p50_ns]) for d in res.drains]
    n_pts = max((len(v) for _, v in series), default=0)
    if n_pts == 0:
        return ""
    width = plot_width(len(series))
    plot_h = 140
    height = TOP + plot_h + AXIS_H
    top = inlier_top([v for _, v in series])
    stride = max(1, math.ceil(n_pts / width))
    xstep = width / max(n_pts - 1, 1)
    out = [_open("xr-lead", "median host lead per step and rank", width, height),
           f'<text x="{LABEL_W - 6}" y="{TOP + 4}" text-anchor="end">{top:,.0f}</text>'
           f'<text x="{LABEL_W - 6}" y="{TOP + plot_h}" text-anchor="end">0</text>'
           f'<line x1="{LABEL_W}" y1="{TOP}" x2="{LABEL_W}" y2="{TOP + plot_h}" stroke="#999"/>']
    marks: list[str] = []
    for i, (name, v) in enumerate(series):
        color, dash = rank_style(i)
        d, pen = [], "M"
        for k in range(0, len(v), stride):
            x = v[k]
            if x is None:
                pen = "M"
                continue
            px = LABEL_W + k * xstep
            d.append(f"{pen}{px:.1f} {TOP + plot_h - min(x, top) / top * plot_h:.1f}")
            pen = "L"
            if x > top:  # off the axis: at the top edge, with its value
                end = px > LABEL_W + 0.8 * width  # near the right edge: text to the left
                label = (f'<text x="{px - 6 if end else px + 6:.1f}" y="{TOP - 4}" '
                         f'text-anchor="{"end" if end else "start"}">{x:,.0f} us</text>'
                         if len(marks) < 4 else "")
                marks.append(f'<g class="off-axis" data-us="{x:.3f}"><path d="M{px:.1f} '
                             f'{TOP - 8}l-4 6h8z" fill="{color}"/>{label}<title>{e(name)}: '
                             f"{x:,.1f} us, off the axis (an outlier step)</title></g>")
        if d:
            out.append(f'<path d="{"".join(d)}" stroke="{color}" stroke-width="1.5" '
                       f'stroke-dasharray="{dash}" fill="none"><title>{e(name)}: median host '
                       "lead</title></path>")
    out.extend(marks)
    steps = [s["step"] for s in res.critical_path.steps or []]
    if len(steps) != n_pts or None in steps:  # no step numbers to show: their positions
        steps = list(range(n_pts))
    first, last = steps[0], steps[-1]
    y = TOP + plot_h + 2
    out.append(f'<line x1="{LABEL_W}" y1="{y}" x2="{LABEL_W + width}" y2="{y}" stroke="#999"/>'
               f'<text x="{LABEL_W}" y="{y + 15}">step {e(first)}</text>'
               f'<text x="{LABEL_W + width}" y="{y + 15}" text-anchor="end">step {e(last)}'
               "</text></svg>")
    return "".join(out)
