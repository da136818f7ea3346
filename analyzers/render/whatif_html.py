"""A what-if as an HTML ``<section>`` (no scripts): the HTML report embeds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.render.escape import e
from profplug.analyzers.render.whatif_table import warnings_of

if TYPE_CHECKING:
    from profplug.analyzers.whatif.result import WhatIfResult


def render_whatif_html(res: WhatIfResult, out: TextIO) -> None:
    """Write the what-if section: per rank times, idle by cause, assumptions, warnings."""
    what = e(res.dropped())
    note = f'<p class="note">{e(res.drop_note)}</p>' if res.drop_note else ""
    rows = "".join(
        f"<tr><td>{r.rank}</td><td>{e(r.basis)}</td><td>{r.recorded_us:,.1f}</td>"
        f"<td>{r.replayed_us:,.1f}</td><td>{r.model_error_pct:+.1f}%</td>"
        f"<td>{r.predicted_us:,.1f} &plusmn; "
        + ("n/a (peer ranks missing)" if r.error_band_pct is None else f"{r.error_band_pct:.1f}%")
        + "</td>"
        f"<td>{r.saving_us:,.1f} ({r.saving_pct:.1f}%)</td>"
        f"<td>{r.direct_us:,.1f}</td><td>{r.indirect_us:,.1f}</td></tr>"
        for r in res.ranks)
    causes = "".join(
        f"<tr><td>{r.rank}</td>" + "".join(
            f"<td>{r.recorded_idle_by_cause_us.get(c, 0.0):,.1f} &rarr; {v:,.1f}</td>"
            for c, v in r.predicted_idle_by_cause_us.items()) + "</tr>"
        for r in res.ranks)
    cause_hdr = "".join(f"<th>{e(c)}</th>" for c in
                        (res.ranks[0].predicted_idle_by_cause_us if res.ranks else {}))
    assumptions = "".join(f"<li>{e(a)}</li>" for a in res.assumptions)
    warnings = "".join(f"<li>{e(x)}</li>" for x in warnings_of(res))
    from profplug.analyzers.report.finding import finding

    lead = f'<p class="finding">{e(finding(res))}</p>' if res.ranks else ""
    bound = "".join(
        f"<li>rank {r.rank}: {r.bound_us:,.1f} us (its own host {r.host_cadence_us:,.1f})"
        + (f"; binds: the replay gave {r.replay_predicted_us:,.1f}" if r.bound_binds else "")
        + (f"; band for a separate run &plusmn;{r.run_band_pct:.0f}%" if r.run_band_pct else "")
        + "</li>"
        for r in res.ranks if r.bound_us > 0)
    out.write(
        f'<section class="whatif"><h2>What if: without {what}</h2>{lead}{note}'
        + (f'<ul class="warn">{warnings}</ul>' if warnings else "")
        + f"<p>{res.n_events:,} events replayed in {res.replay_s:.2f} s. Times in us per "
        "step (the median over the non-outlier steps; or per GPU window). saving = recorded "
        "&minus; predicted, direct = GPU idle in the dropped syncs, indirect = saving "
        "&minus; direct (docs/costs.md). Model error: the replay of the trace as recorded vs the "
        "trace. &plusmn;: the prediction's error band (replay error plus the measured "
        "validation, by how host-bound the predicted run is).</p>"
        "<table><thead><tr><th>rank</th><th>per</th><th>recorded</th><th>replayed</th>"
        "<th>model error</th><th>predicted</th><th>saving</th><th>direct</th>"
        f"<th>indirect</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<h3>GPU idle by cause, recorded &rarr; predicted</h3><table><thead><tr><th>rank</th>"
        f"{cause_hdr}</tr></thead><tbody>{causes}</tbody></table>"
        + (f"<h3>Data-flow bound (no step under the slowest coupled host's cadence, us) and "
           f"the band for a separate run</h3><ul>{bound}</ul>" if bound else "")
        +
        f"<details><summary>Assumptions</summary><ul>{assumptions}</ul></details>"
        "</section>")
