"""The A/B page's plots as inline SVG drawn here (no script, no plotting library), in the
report page's style (``bars_svg``, ``crossrank_svg``), from :func:`ab_html.plot_data`'s
numbers:

- ``runs_svg``: each run's step-time distribution, a box per run (25th-75th percentile and
  median of the pipeline's per-step time, whiskers at the 5th and 95th), in execution order,
  coloured by policy, rounds marked;
- ``ci_svg``: per policy its round medians (dots), its median and 95% CI (bar);
- ``speedup_svg``: per policy its speedup over device with its CI, the per-round ratios
  (dots), and the no-difference line at 1.0;
- ``dist_svg``: every step of every successful run pooled per policy (share of steps per
  bin), with a what-if prediction, its error band, the prediction at the traced host speed
  and the traced run's recorded step drawn on it.

Sizes are bounded by the number of runs and bins, not steps. Hovering a mark shows its
value (``<title>``). Every string reaches the SVG through ``escape.e``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from profplug.analyzers.render.escape import e

LABEL_W, PLOT_W, RIGHT_W, TOP, AXIS_H = 90, 720, 230, 14, 34
RUNS_H, ROW_H, DIST_H = 240, 30, 220
GREY = "#9d9d9d"
NO_CI = "too few rounds for a CI"


def ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """Round values between ``lo`` and ``hi`` (about ``n``)."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / n
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if step * m >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float, ts: list[float]) -> str:
    """A tick label with as many decimals as the ticks ``ts`` need to be told apart."""
    digits = next((d for d in range(7)
                   if all(abs(round(t, d) - t) <= 1e-9 * max(1.0, abs(t)) for t in ts)), 6)
    return f"{v:,.{digits}f}"


class Scale:
    """A linear map from [lo, hi] (padded by ``pad`` of the span) to [a, b] px."""

    def __init__(self, values: Sequence[float], a: float, b: float, pad: float = 0.06) -> None:
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        span = hi - lo or abs(hi) * 0.1 or 1.0
        self.lo, self.hi = lo - pad * span, hi + pad * span
        self.a, self.b = a, b

    def __call__(self, v: float) -> float:
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def _open(pid: str, label: str, width: int, height: int) -> str:
    return (f'<svg id="{e(pid)}" class="ab-plot" viewBox="0 0 {width} {height}" '
            f'width="{width}" role="img" aria-label="{e(label)}">')


def x_axis(sx: Scale, y: float, unit: str) -> str:
    """A horizontal axis at ``y`` with its ticks and unit."""
    out = [f'<line x1="{sx.a}" y1="{y}" x2="{sx.b}" y2="{y}" stroke="#999"/>']
    ts = ticks(sx.lo, sx.hi)
    for t in ts:
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#999"/>'
                   f'<text x="{x:.1f}" y="{y + 16}" text-anchor="middle">'
                   f"{e(_fmt(t, ts))}</text>")
    out.append(f'<text x="{sx.b}" y="{y + 30}" text-anchor="end">{e(unit)}</text>')
    return "".join(out)


def y_axis(sy: Scale, x: float, unit: str) -> str:
    """A vertical axis at ``x`` with its ticks, light grid lines and unit."""
    out = [f'<line x1="{x}" y1="{sy.b}" x2="{x}" y2="{sy.a}" stroke="#999"/>']
    ts = ticks(sy.lo, sy.hi, 5)
    for t in ts:
        y = sy(t)
        out.append(f'<line x1="{x - 4}" y1="{y:.1f}" x2="{x + PLOT_W}" y2="{y:.1f}" '
                   f'stroke="#eee"/><text x="{x - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{e(_fmt(t, ts))}</text>")
    out.append(f'<text x="{x - 6}" y="{sy.b - 12}" text-anchor="end">{e(unit)}</text>')
    return "".join(out)


# ------------------------------------------------------------------------------ per run
def runs_svg(data: dict[str, Any]) -> str:
    """A box per run (see the module docstring); empty without timed runs."""
    runs = [r for r in data["runs"] if r["q"]]
    if not runs:
        return ""
    colors = data["colors"]
    top, bottom = TOP + 14, TOP + RUNS_H
    sy = Scale([v for r in runs for v in r["q"]], bottom, top)
    slot = PLOT_W / len(runs)
    box = max(2.0, min(22.0, slot * 0.7))
    width, height = LABEL_W + PLOT_W + 20, bottom + AXIS_H
    out = [_open("ab-plot-runs", "step-time distribution of every run", width, height),
           y_axis(sy, LABEL_W, "us/step")]
    last_round = None
    for i, r in enumerate(runs):
        cx = LABEL_W + (i + 0.5) * slot
        if r["round"] != last_round:  # a new round: a separator and its label
            x0 = LABEL_W + i * slot
            if i:
                out.append(f'<line x1="{x0:.1f}" y1="{top}" x2="{x0:.1f}" y2="{bottom}" '
                           'stroke="#ccc" stroke-dasharray="3 3"/>')
            if len(runs) <= 60 or r["round"] % max(1, len(runs) // 60 + 1) == 0:
                out.append(f'<text x="{x0 + 2:.1f}" y="{bottom + 16}">r{e(r["round"])}</text>')
            last_round = r["round"]
        color = colors.get(r["policy"], GREY) if r["ok"] else GREY
        q5, q25, q50, q75, q95 = (sy(v) for v in r["q"])
        tip = (f'{r["label"]}{"" if r["ok"] else " (failed)"}: median {r["q"][2]:,.1f} us, '
               f'25-75% {r["q"][1]:,.1f}-{r["q"][3]:,.1f}, 5-95% {r["q"][0]:,.1f}-'
               f'{r["q"][4]:,.1f} ({r["n"]} steps)')
        dash = "" if r["ok"] else ' stroke-dasharray="2 2"'
        out.append(
            f'<g data-policy="{e(r["policy"])}" data-run="{e(r["index"])}"><title>{e(tip)}'
            f'</title><line x1="{cx:.1f}" y1="{q95:.1f}" x2="{cx:.1f}" y2="{q5:.1f}" '
            f'stroke="{e(color)}"{dash}/><rect x="{cx - box / 2:.1f}" y="{q75:.1f}" '
            f'width="{box:.1f}" height="{max(q25 - q75, 1.0):.1f}" fill="{e(color)}" '
            f'fill-opacity="0.45" stroke="{e(color)}"{dash}/><line x1="{cx - box / 2:.1f}" '
            f'y1="{q50:.1f}" x2="{cx + box / 2:.1f}" y2="{q50:.1f}" stroke="{e(color)}" '
            'stroke-width="2.5"/></g>')
    out.append("</svg>")
    return "".join(out)


# ------------------------------------------------------------------------------ per policy
def _rows_svg(pid: str, label: str, rows: list[dict[str, Any]], sx: Scale, unit: str,
              ref: float | None = None) -> str:
    """One row per item: ``dots`` (round values), ``ci`` bar, ``mid`` mark, ``note`` text."""
    height = TOP + ROW_H * len(rows) + AXIS_H
    width = LABEL_W + PLOT_W + RIGHT_W
    out = [_open(pid, label, width, height)]
    if ref is not None and sx.lo <= ref <= sx.hi:
        x = sx(ref)
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 8}" x2="{x:.1f}" '
                   f'y2="{TOP + ROW_H * len(rows)}" stroke="#666" stroke-dasharray="4 3">'
                   f"<title>{e(f'{ref:g}: no difference')}</title></line>")
    for i, row in enumerate(rows):
        y = TOP + i * ROW_H + ROW_H / 2
        color = e(row["color"])
        out.append(f'<g data-policy="{e(row["name"])}"><text x="{LABEL_W - 8}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{e(row["name"])}</text>')
        if row.get("ci"):
            lo, hi = row["ci"]
            out.append(f'<rect class="ci" x="{sx(lo):.1f}" y="{y - 5:.1f}" '
                       f'width="{max(sx(hi) - sx(lo), 1.5):.1f}" height="10" fill="{color}" '
                       f'fill-opacity="0.35" stroke="{color}"><title>{e(row["name"])}: 95% CI '
                       f"{e(row['fmt'](lo))}-{e(row['fmt'](hi))} {e(unit)}</title></rect>")
        for k, v in row["dots"]:
            out.append(f'<circle cx="{sx(v):.1f}" cy="{y:.1f}" r="3.5" fill="#fff" '
                       f'stroke="{color}" stroke-width="1.5"><title>{e(row["name"])}, round '
                       f"{e(k)}: {e(row['fmt'](v))} {e(unit)}</title></circle>")
        if row.get("mid") is not None:
            x = sx(row["mid"])
            out.append(f'<path d="M{x:.1f} {y - 9:.1f}l6 9l-6 9l-6 -9z" fill="{color}" '
                       f'stroke="#222" stroke-width="0.8"><title>{e(row["name"])}: '
                       f"{e(row['fmt'](row['mid']))} {e(unit)}</title></path>")
        out.append(f'<text x="{LABEL_W + PLOT_W + 10}" y="{y + 4:.1f}">{e(row["note"])}</text>'
                   "</g>")
    out.append(x_axis(sx, TOP + ROW_H * len(rows) + 2, unit))
    out.append("</svg>")
    return "".join(out)


def ci_svg(data: dict[str, Any]) -> str:
    """Per policy: round medians, median and 95% CI; empty when no policy has a result."""
    rows, values = [], []
    for s in data["summary"]:
        if s["median"] is None:
            continue
        dots = [(k, v) for k, v in enumerate(s["rounds"]) if v is not None]
        note = (f"{s['median']:,.1f} (95% CI {s['ci'][0]:,.1f}-{s['ci'][1]:,.1f})" if s["ci"]
                else f"{s['median']:,.1f} ({NO_CI})")
        rows.append({"name": s["policy"], "color": data["colors"].get(s["policy"], GREY),
                     "dots": dots, "ci": s["ci"], "mid": s["median"], "note": note,
                     "fmt": lambda v: f"{v:,.1f}"})
        values += [v for _, v in dots] + [s["median"], *(s["ci"] or [])]
    if not rows:
        return ""
    sx = Scale(values, LABEL_W, LABEL_W + PLOT_W)
    return _rows_svg("ab-plot-ci", "median step and 95% CI per policy", rows, sx, "us/step")


def speedup_svg(data: dict[str, Any]) -> str:
    """Per policy: speedup over device, its CI, the per-round ratios; empty when none."""
    rows, values = [], [1.0]
    for s in data["summary"]:
        if s["speedup"] is None:
            continue
        ci = s["speedup_ci"]
        note = (f"{s['speedup']:.3f}x (95% CI {ci[0]:.3f}-{ci[1]:.3f}x)" if ci
                else f"{s['speedup']:.3f}x ({NO_CI})")
        rows.append({"name": s["policy"], "color": data["colors"].get(s["policy"], GREY),
                     "dots": s["round_ratios"], "ci": ci, "mid": s["speedup"], "note": note,
                     "fmt": lambda v: f"{v:.3f}"})
        values += [v for _, v in s["round_ratios"]] + [s["speedup"], *(ci or [])]
    if not rows:
        return ""
    sx = Scale(values, LABEL_W, LABEL_W + PLOT_W)
    return _rows_svg("ab-plot-speedup", "speedup over device and 95% CI per policy", rows, sx,
                     "x device", ref=1.0)


# ------------------------------------------------------------------------------ pooled
WHATIF_MARKS = (("predicted", "6 4", "what-if"), ("traced", "8 3 2 3", "what-if, traced host"),
                ("recorded", "2 3", "traced device run"))


CHAR_W = 6.6  # px per character of a 12px label (an upper bound for digits and letters)


def place_labels(marks: list[tuple[float, str]], left: float, right: float
                 ) -> list[tuple[int, str]]:
    """Per vertical mark (x px, label), its label's row and anchor ("start": right of the
    line): row ``r`` sits above rows ``r + 1``..., each mark's line runs from its row down,
    so a label must not cover another label of its row nor a line that starts above it.
    The marks are placed right to left, then left to right: the first order that fits."""
    best = None
    for order in (sorted(range(len(marks)), key=lambda i: -marks[i][0]),
                  sorted(range(len(marks)), key=lambda i: marks[i][0])):
        got, ok = _place([marks[i] for i in order], left, right)
        res = [(0, "start")] * len(marks)
        for i, g in zip(order, got, strict=True):
            res[i] = g
        if ok:
            return res
        best = best or res
    return best or []


def _place(marks: list[tuple[float, str]], left: float, right: float
           ) -> tuple[list[tuple[int, str]], bool]:
    """``place_labels`` in this order; and whether every label found a place."""
    ok = True
    boxes: list[tuple[int, float, float]] = []  # (row, x0, x1) of placed labels
    lines: list[tuple[int, float]] = []  # (row, x) of placed lines
    out = []
    for x, text in marks:
        w = CHAR_W * len(text) + 4
        found = None
        for row in range(len(marks)):
            for anchor in ("start", "end") if x + w <= right + 20 else ("end", "start"):
                x0, x1 = (x, x + w) if anchor == "start" else (x - w, x)
                if x0 < left - LABEL_W or x1 > right + 20:
                    continue
                if any(r == row and x0 < b1 and b0 < x1 for r, b0, b1 in boxes):
                    continue  # another label of this row
                if any(r < row and x0 - 2 <= lx <= x1 + 2 for r, lx in lines):
                    continue  # a line from above crosses it
                if any(r > row and b0 - 2 <= x <= b1 + 2 for r, b0, b1 in boxes):
                    continue  # this line would cross a label below
                found = (row, anchor)
                break
            if found:
                break
        ok = ok and found is not None
        row, anchor = found or (len(marks) - 1, "start")
        boxes.append((row, *((x, x + w) if anchor == "start" else (x - w, x))))
        lines.append((row, x))
        out.append((row, anchor))
    return out, ok


def dist_svg(data: dict[str, Any]) -> str:
    """Pooled step-time histograms per policy, and the what-if on them; empty without data."""
    hist, wi = data["hist"], data["whatif"]
    edges = hist.get("edges")
    if not edges:
        return ""
    marks = {k: wi.get(k) for k, _, _ in WHATIF_MARKS} if wi else {}
    band = wi.get("band") if wi else None
    xs = [edges[0], edges[-1], *(v for v in marks.values() if v is not None), *(band or [])]
    sx = Scale(xs, LABEL_W, LABEL_W + PLOT_W, pad=0.02)
    shares = {p: [c / max(sum(hist[p]), 1) * 100.0 for c in hist[p]]
              for p in data["policies"] if p in hist}
    top_share = max([max(v) for v in shares.values() if v] + [1.0])
    lines_h = 16 * len([v for v in marks.values() if v is not None])
    top, bottom = TOP + lines_h + 14, TOP + lines_h + DIST_H
    sy = Scale([0.0, top_share], bottom, top, pad=0.0)
    width, height = LABEL_W + PLOT_W + 20, bottom + AXIS_H
    out = [_open("ab-plot-hist", "pooled step-time distribution per policy", width, height),
           y_axis(sy, LABEL_W, "% steps")]
    if band and band[1] > band[0]:
        out.append(f'<rect x="{sx(band[0]):.1f}" y="{top}" width="{sx(band[1]) - sx(band[0]):.1f}"'
                   f' height="{bottom - top}" fill="#333" fill-opacity="0.08">'
                   f"<title>{e(f'what-if error band {band[0]:,.1f}-{band[1]:,.1f} us')}</title>"
                   "</rect>")
    for p, v in shares.items():
        color = e(data["colors"].get(p, GREY))
        d = [f"M{sx(edges[0]):.1f} {bottom}"]
        for k, share in enumerate(v):
            d.append(f"V{sy(share):.1f}H{sx(edges[k + 1]):.1f}")
        d.append(f"V{bottom}Z")
        out.append(f'<path data-policy="{e(p)}" d="{"".join(d)}" fill="{color}" '
                   f'fill-opacity="0.35" stroke="{color}" stroke-width="1.2"><title>{e(p)}: '
                   f"{sum(hist[p]):,} steps</title></path>")
    placed = place_labels([(sx(at), f"{name} {at:,.1f}") for key, _, name in WHATIF_MARKS
                           if (at := marks.get(key)) is not None], LABEL_W, LABEL_W + PLOT_W)
    drawn = [(key, dash, name, at) for key, dash, name in WHATIF_MARKS
             if (at := marks.get(key)) is not None]
    for (key, dash, name, v), (row, anchor) in zip(drawn, placed, strict=True):
        x = sx(v)
        ty = TOP + 12 + 16 * row
        shift = -4 if anchor == "end" else 4
        out.append(f'<g class="whatif" data-mark="{e(key)}"><line x1="{x:.1f}" y1="{ty - 4}" '
                   f'x2="{x:.1f}" y2="{bottom}" stroke="#222" stroke-width="2" '
                   f'stroke-dasharray="{dash}"/><text x="{x + shift:.1f}" y="{ty}" '
                   f'text-anchor="{anchor}">{e(f"{name} {v:,.1f}")}</text><title>'
                   f"{e(f'{name}: {v:,.1f} us/step')}</title></g>")
    out.append(x_axis(sx, bottom + 2, "us/step"))
    out.append("</svg>")
    return "".join(out)
