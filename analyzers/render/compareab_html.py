"""The page of ``compare A AB_DIR`` (``AbComparison``): the answer first (A's what-if
against ab's measured policy, its figure: the prediction and its band, ab's round medians,
median and 95% CI on one axis), then run A's report. Colours from ``palette``; the figure
carries its numbers in ``data-*`` attributes (us, %)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.render.compare_html import LABEL_W, ROW_H, TOP, WIDTH, axis_svg, scale
from profplug.analyzers.render.escape import e
from profplug.analyzers.render.html import render_html
from profplug.analyzers.render.palette import COLORS, legend_html

if TYPE_CHECKING:
    from profplug.analyzers.compare.ab_runs import AbComparison


def figure_svg(cmp: AbComparison) -> str:
    a = cmp.answer
    vals = [a.predicted_lo_us, a.predicted_hi_us, a.measured_lo_us, a.measured_hi_us,
            *cmp.round_medians_us]
    lo, hi, sx = scale(vals)
    cp, cm = COLORS["predicted"], COLORS["measured"]
    y1, y2 = TOP + ROW_H / 2, TOP + ROW_H * 1.5
    out = [f'<text x="{LABEL_W - 8}" y="{y1 + 4}" text-anchor="end">A: what-if</text>'
           f'<text x="{LABEL_W - 8}" y="{y2 + 4}" text-anchor="end">B: ab {e(cmp.policy)}'
           "</text>",
           f'<rect x="{sx(a.predicted_lo_us):.1f}" y="{y1 - 6}" width="'
           f'{sx(a.predicted_hi_us) - sx(a.predicted_lo_us):.1f}" height="12" fill="{cp}" '
           f'fill-opacity="0.2" stroke="{cp}"><title>band ±{a.band_pct:.0f}%</title></rect>',
           f'<circle cx="{sx(a.predicted_us):.1f}" cy="{y1}" r="6" fill="{cp}" '
           f'class="predicted"><title>predicted {a.predicted_us:,.1f} us</title></circle>',
           f'<rect x="{sx(a.measured_lo_us):.1f}" y="{y2 - 6}" width="'
           f'{max(1.0, sx(a.measured_hi_us) - sx(a.measured_lo_us)):.1f}" height="12" '
           f'fill="{cm}" fill-opacity="0.25" stroke="{cm}"><title>{e(a.measured_by)}</title>'
           "</rect>",
           *(f'<circle cx="{sx(v):.1f}" cy="{y2}" r="3" fill="#fff" stroke="{cm}"><title>a '
             f"round: {v:,.1f} us</title></circle>" for v in cmp.round_medians_us),
           f'<line x1="{sx(a.measured_us):.1f}" y1="{TOP}" x2="{sx(a.measured_us):.1f}" '
           f'y2="{y2 + 12}" stroke="{cm}" stroke-width="2" stroke-dasharray="5 3" '
           f'class="measured"><title>measured {a.measured_us:,.1f} us</title></line>']
    axis, h = axis_svg(lo, hi, sx, TOP + ROW_H * 2 + 4)
    return (f'<svg class="cmp-plot" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" '
            'role="img" aria-label="prediction against ab">' + "".join(out) + axis + "</svg>")


def render_compareab_html(cmp: AbComparison, out: TextIO, top: Sequence[str] = ()) -> None:
    """The page; ``top``: run A's run-level sections (its what-if)."""
    a = cmp.answer
    lead = ('<section id="answer"><h2>Answer</h2><div id="headline"><p id="answer-line">'
            f"{e(a.sentence(cmp.label_a, cmp.label_b))}</p>"
            + (f'<p id="verdict">ab: {e(cmp.ab_verdict)}</p>' if cmp.ab_verdict else "")
            + f'</div><p class="sub">{e(cmp.label_a)}\'s what-if at ab\'s unprofiled device '
            f"step ({cmp.calibrated_on_us:,.1f} us); circles: ab's round medians.</p>"
            f'<figure id="answer-figure" data-predicted-us="{a.predicted_us:.3f}" '
            f'data-band-pct="{a.band_pct:.3f}" data-measured-us="{a.measured_us:.3f}" '
            f'data-error-pct="{a.error_pct:.3f}">{figure_svg(cmp)}'
            + legend_html(["predicted", "measured"],
                          {"predicted": f"predicted (what-if of A = {cmp.label_a})",
                           "measured": f"measured (B = {cmp.label_b}: ab {cmp.policy})"})
            + "</figure></section>"
            + f"<h2>Run A: {e(cmp.label_a)}</h2>")
    render_html(cmp.report_a, out, lead=[lead], top=top,
                title=f"profplug compare: {cmp.label_a} vs {cmp.label_b} (ab)")
