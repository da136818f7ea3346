"""The top of the compare page: its header (ranks per run), the mismatch warnings, the
answer (A's what-if predicted X; B measured Y; error E%) and the first figure: the two runs'
per-step distributions with the prediction and its band on one axis (inline SVG, colours
from ``palette``). The figure carries its numbers in ``data-*`` attributes (us, %), which the
browser tests read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from profplug.analyzers.compare.noise import pipeline_step_us
from profplug.analyzers.render.against_html import against_html
from profplug.analyzers.render.escape import e
from profplug.analyzers.render.palette import COLORS, legend_html, run_keys
from profplug.analyzers.steps.runstep import run_step
from profplug.analyzers.steps.stats import center, outlier_mask

if TYPE_CHECKING:
    from profplug.analyzers.compare.answer import Answer
    from profplug.analyzers.compare.reports import Comparison
    from profplug.analyzers.report.analysis import Report

WIDTH, LABEL_W, ROW_H, TOP, AXIS_H = 760, 150, 30, 8, 36
EDGE_W = 130  # right of the axis: outlier steps' values (``figure_svg``)


def policy_of(rep: Report) -> str | None:
    """The sync policy ``profplug run`` recorded in the run's ``run.json`` (None without)."""
    opts = rep.meta.get("options") if isinstance(rep.meta, dict) else None
    sync = opts.get("sync") if isinstance(opts, dict) else None
    return sync if isinstance(sync, str) else None


def keys_of(cmp: Comparison) -> tuple[str, str]:
    """The palette keys of runs A and B (``palette.run_keys``)."""
    return run_keys(policy_of(cmp.report_a), policy_of(cmp.report_b))


def _run_desc(label: str, rep: Report) -> str:
    n = len(rep.ranks)
    sources = "/".join(sorted({r.source for r in rep.ranks})) or "-"
    return f"{label}: {n} rank{'s' if n != 1 else ''} ({sources})"


def header_html(cmp: Comparison) -> str:
    """The line under the title: each run's rank count and trace format."""
    return ('<p class="sub" id="runs">' + e(_run_desc("A = " + cmp.label_a, cmp.report_a))
            + " · " + e(_run_desc("B = " + cmp.label_b, cmp.report_b))
            + f" · tolerance {cmp.report_a.options.tolerance_ns / 1000:g} us · times in us</p>")


def _ticks(lo: float, hi: float) -> list[float]:
    span = hi - lo
    step = 10 ** np.floor(np.log10(span / 4)) if span > 0 else 1.0
    for m in (1, 2, 5, 10):
        if span / (step * m) <= 6:
            step *= m
            break
    first = np.ceil(lo / step) * step
    return [float(x) for x in np.arange(first, hi + step / 2, step) if lo <= x <= hi]


def scale(vals: list[float], right: float = 20
          ) -> tuple[float, float, Callable[[float], float]]:
    """The axis' range (5% padding, from 0 at least) and the us -> x mapping; ``right``: the
    px left free right of the axis."""
    lo, hi = min(vals), max(vals)
    pad = 0.05 * (hi - lo) if hi > lo else 0.05 * hi or 1.0
    lo, hi = max(0.0, lo - pad), hi + pad
    plot_w = WIDTH - LABEL_W - right

    def sx(v: float) -> float:
        return LABEL_W + (v - lo) / (hi - lo) * plot_w

    return lo, hi, sx


def axis_svg(lo: float, hi: float, sx: Callable[[float], float], base: float
             ) -> tuple[str, float]:
    """The us axis at height ``base`` with its ticks and unit; and the figure's height."""
    right = sx(hi)
    axis = [f'<line x1="{LABEL_W}" y1="{base}" x2="{right}" y2="{base}" stroke="#999"/>']
    for t in _ticks(lo, hi):
        axis.append(f'<line x1="{sx(t):.1f}" y1="{base}" x2="{sx(t):.1f}" y2="{base + 4}" '
                    f'stroke="#999"/><text x="{sx(t):.1f}" y="{base + 16}" '
                    f'text-anchor="middle">{t:,.0f}</text>')
    h = base + AXIS_H
    axis.append(f'<text x="{right}" y="{h - 6}" text-anchor="end">us per step</text>')
    return "".join(axis), h


def inliers(x: np.ndarray) -> np.ndarray:
    """The steps of ``x`` that are not outliers (``steps.stats.outlier_mask``)."""
    return x[~outlier_mask(x)] if x.size else x


def edge_marks(y: float, x: np.ndarray, lo: float, hi: float, sx: Callable[[float], float],
               color: str, name: str) -> str:
    """Steps of ``x`` off the axis [lo, hi], marked at its edge: a triangle pointing out, and
    right of the axis their count and value (the largest)."""
    out = []
    for side, off in (("hi", x[x > hi]), ("lo", x[x < lo])):
        if off.size == 0:
            continue
        edge, d = (sx(hi), 1) if side == "hi" else (sx(lo), -1)
        worst = float(off.max() if side == "hi" else off.min())
        n = int(off.size)
        what = (f"{worst:,.0f} us" if n == 1 else
                f"{n} steps, {'max' if side == 'hi' else 'min'} {worst:,.0f} us")
        out.append(f'<g class="off-axis" data-side="{side}" data-count="{n}" data-us="'
                   f'{worst:.3f}"><path d="M{edge + 7 * d:.1f} {y}l{-7 * d} -5v10z" '
                   f'fill="{color}"/><title>{e(name)}: {n} outlier step(s) off the axis: '
                   + e(", ".join(f"{float(v):,.1f}" for v in sorted(off))) + " us</title>"
                   + (f'<text x="{sx(hi) + 11:.1f}" y="{y + 4}">{e(what)}</text>'
                      if side == "hi" else "") + "</g>")
    return "".join(out)


def figure_svg(cmp: Comparison) -> str:
    """Per-step distributions of A and B, A's prediction with its band (when A has a
    what-if), on one axis in us/step; the axis spans the steps that are not outliers
    (``steps.stats``), outlier steps are marked at its edge with their value."""
    xa, _ = pipeline_step_us(cmp.report_a)
    xb, _ = pipeline_step_us(cmp.report_b)
    ans = cmp.answer
    if xa.size == 0 and xb.size == 0:
        return ""
    vals = [*inliers(xa).tolist(), *inliers(xb).tolist()]
    if ans is not None:
        vals += [ans.predicted_lo_us, ans.predicted_hi_us, ans.measured_us]
    lo, hi, sx = scale(vals, right=EDGE_W)
    key_a, key_b = keys_of(cmp)
    rows: list[tuple[str, str]] = [("A: steps", key_a)]
    y = TOP + ROW_H / 2
    out = [_strip_svg(y, xa, (lo, hi, sx), COLORS[key_a], f"{cmp.label_a} step",
                      _run_step_us(cmp.report_a, xa))]
    if ans is not None:
        y += ROW_H
        rows.append(("A: what-if", "predicted"))
        out.append(_prediction_svg(ans, y, sx))
    y += ROW_H
    rows.append(("B: steps", key_b))
    out.append(_strip_svg(y, xb, (lo, hi, sx), COLORS[key_b], f"{cmp.label_b} step",
                          _run_step_us(cmp.report_b, xb)))
    if ans is not None:
        c = COLORS["measured"]
        out.append(f'<line x1="{sx(ans.measured_us):.1f}" y1="{TOP}" x2="{sx(ans.measured_us):.1f}"'
                   f' y2="{y + 12}" stroke="{c}" stroke-width="2" stroke-dasharray="5 3" '
                   f'class="measured"><title>measured {ans.measured_us:,.1f} us</title></line>')
    labels = "".join(f'<text x="{LABEL_W - 8}" y="{TOP + ROW_H / 2 + i * ROW_H + 4}" '
                     f'text-anchor="end">{e(name)}</text>' for i, (name, _) in enumerate(rows))
    axis, h = axis_svg(lo, hi, sx, TOP + ROW_H * len(rows) + 4)
    return (f'<svg class="cmp-plot" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" '
            f'data-axis-lo-us="{lo:.3f}" data-axis-hi-us="{hi:.3f}" '
            'role="img" aria-label="per-step times of both runs and the prediction">'
            + labels + "".join(out) + axis + "</svg>")


def _strip_svg(y: float, x: np.ndarray, axis: tuple[float, float, Callable[[float], float]],
               color: str, name: str, med: float) -> str:
    """One run's row at height ``y``: its per-step series ``x`` (us; the slowest rank's) as
    points over their quartile box, the steps off the ``axis`` (lo, hi, us -> x) marked at
    its edge, and the run's step ``med`` (runstep: the slowest rank's median step, as
    "measured" and the text) as a line."""
    if x.size == 0:
        return ""
    lo, hi, sx = axis
    q1, q3 = (min(max(float(v), lo), hi) for v in np.percentile(x, [25, 75]))
    out = [f'<rect x="{sx(q1):.1f}" y="{y - 7}" width="{max(1.0, sx(q3) - sx(q1)):.1f}"'
           f' height="14" fill="{color}" fill-opacity="0.25"/>']
    out.extend(f'<circle cx="{sx(float(v)):.1f}" cy="{y}" r="2.6" fill="{color}">'
               f"<title>{e(name)}: {float(v):,.1f} us</title></circle>"
               for v in x if lo <= v <= hi)
    out.append(edge_marks(y, x, lo, hi, sx, color, name))
    out.append(f'<line x1="{sx(med):.1f}" y1="{y - 10}" x2="{sx(med):.1f}" y2="{y + 10}" '
               f'stroke="{color}" stroke-width="3" data-median-us="{med:.3f}">'
               f"<title>{e(name)}: median {med:,.1f} us (outlier steps left out)</title></line>")
    return "".join(out)


def _prediction_svg(ans: Answer, y: float, sx: Callable[[float], float]) -> str:
    """A's what-if row at height ``y``: the predicted step (us) and its band."""
    c = COLORS["predicted"]
    return (f'<rect x="{sx(ans.predicted_lo_us):.1f}" y="{y - 6}" width="'
            f'{sx(ans.predicted_hi_us) - sx(ans.predicted_lo_us):.1f}" height="12" '
            f'fill="{c}" fill-opacity="0.2" stroke="{c}"><title>band ±'
            f"{ans.band_pct:.0f}%</title></rect>"
            f'<circle cx="{sx(ans.predicted_us):.1f}" cy="{y}" r="6" fill="{c}" '
            f'class="predicted"><title>predicted {ans.predicted_us:,.1f} us</title>'
            "</circle>")


def answer_html(cmp: Comparison) -> str:
    """Mismatch warnings, the answer, the step-time verdict and the figure, in that order;
    then, as in the terminal, A's what-if lined up with B (the segments)."""
    out = ['<section id="answer"><h2>Answer</h2>']
    if cmp.mismatches:
        out.append('<ul class="warn" id="mismatches">'
                   + "".join(f"<li>warning: {e(m)}</li>" for m in cmp.mismatches) + "</ul>")
    ans = cmp.answer
    attrs = ""
    if ans is not None:
        out.append('<div id="headline"><p id="answer-line">'
                   f"{e(ans.sentence(cmp.label_a, cmp.label_b))}</p>")
        attrs = (f' data-predicted-us="{ans.predicted_us:.3f}" data-band-pct="'
                 f'{ans.band_pct:.3f}" data-measured-us="{ans.measured_us:.3f}" '
                 f'data-error-pct="{ans.error_pct:.3f}"')
    else:
        out.append('<div id="headline"><p id="answer-line" class="sub">no what-if in run A '
                   "(compare --whatif predicts B from A)</p>")
    out.append(f'<p id="verdict">step time: {e(cmp.verdict())}</p></div>')
    if cmp.noise is not None:
        n = cmp.noise
        out.append(f'<p class="sub" id="run-steps">{e(cmp.steps_line())}; per-step spread '
                   f"(each step's slowest rank, {e(n.basis)}) ±{n.spread_a_us:,.1f} / "
                   f"±{n.spread_b_us:,.1f} us. One run each: the run-to-run spread is not in "
                   "this test; <code>profplug ab</code> measures it.</p>")
    svg = figure_svg(cmp)
    if svg:
        key_a, key_b = keys_of(cmp)
        keys = [key_a, *(["predicted", "measured"] if ans is not None else []), key_b]
        labels = {key_a: f"A ({cmp.label_a}) steps", key_b: f"B ({cmp.label_b}) steps"}
        out.append(f'<figure id="answer-figure"{attrs}>{svg}{legend_html(keys, labels)}'
                   "<figcaption class=\"sub\">dots: one step each (the pipeline's slowest rank);"
                   " shaded: the middle half; thick line: median over the non-outlier steps; the axis "
                   "spans the non-outlier steps, a triangle at its edge marks an outlier step "
                   "(its value beside it)"
                   "</figcaption></figure>")
    out.append("</section>")
    if cmp.against is not None:  # A's what-if lined up with B: the top segments per rank
        out.append(against_html(cmp.against, top=3))
    return "".join(out)


def _run_step_us(rep: Any, steps: np.ndarray) -> float:
    """The run's step (``runstep.run_step``), the series' median when it has none."""
    us = run_step(rep.ranks).get("us")
    return float(us) if isinstance(us, (int, float)) and us > 0 else center(steps)
