"""A what-if against a measured run as HTML: what the terminal's against section shows
(``against_table``), for the compare page (``compare A B`` lines A's what-if up with B).

Per rank: the predicted step, its band, the measured step, the error and whether it is
inside (a table, ``id="against"``); then per rank the finding (where the prediction and the
measurement part most) and its segments, largest difference first (``class="segments"``).
Times in us per step, medians over the steady steps; cells carry the JSON's value in
``data-v``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profplug.analyzers.render.escape import e, num_cell

if TYPE_CHECKING:
    from profplug.analyzers.whatif.against import AgainstResult, RankAgainst


def _txt(s: object) -> str:
    return f'<td class="t">{e(s)}</td>'


def _steps_table(res: AgainstResult) -> str:
    head = ("rank", "predicted", "±%", "measured", "err %", "inside", "host pred",
            "host meas", "steps")
    rows = []
    for r in res.ranks:
        inside = "-" if r.inside is None else ("yes" if r.inside else "no")
        rows.append(f'<tr data-rank="{r.rank}">' + num_cell(r.rank, "d") + num_cell(r.predicted_us)
                    + num_cell(r.band_pct) + num_cell(r.measured_us) + num_cell(r.error_pct, "+.1f")
                    + _txt(inside) + num_cell(r.predicted_host_us) + num_cell(r.measured_host_us)
                    + num_cell(r.n_steps, "d") + "</tr>")
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    return (f'<table id="against"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}'
            "</tbody></table>")


def _segments(r: RankAgainst, top: int | None) -> str:
    finding = r.finding()
    if finding is None:
        return ""
    rows = "".join("<tr>" + num_cell(s.predicted_us) + num_cell(s.measured_us)
                   + num_cell(round(s.diff_us, 3), "+,.1f") + _txt(s.where(r.repeated))
                   + "</tr>" for s in (r.top(top) if top else r.segments))
    what = "segment" + (f" (top {top})" if top else "")
    return (f'<p class="finding" data-rank="{r.rank}">{e(finding)}</p>'
            f'<table class="segments" data-rank="{r.rank}"><thead><tr><th>predicted</th>'
            f'<th>measured</th><th>diff</th><th class="t">{what}</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def against_html(res: AgainstResult, top: int | None = None) -> str:
    """The against section (``top``: that many segments per rank, largest first)."""
    out = [f'<section id="against-section"><h2>Against {e(res.label)} (measured)</h2>'
           '<p class="sub">the prediction lined up with it by call. us per step; predicted/'
           "measured: the report's step time, the GPU period; host: step start to the next "
           "step's start; medians over the steady steps lined up by index; diff = predicted "
           "- measured</p>"]
    if res.warnings:
        out.append('<ul class="warn">' + "".join(f"<li>warning: {e(w)}</li>"
                                                 for w in res.warnings) + "</ul>")
    out.append(_steps_table(res))
    out += [_segments(r, top) for r in res.ranks]
    out.append("</section>")
    return "".join(out)
