"""A what-if as an HTML ``<section>`` (no scripts): the HTML report embeds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.render.escape import e
from profplug.analyzers.render.whatif_table import warnings_of
from profplug.analyzers.whatif import figures

if TYPE_CHECKING:
    from profplug.analyzers.whatif.against import AgainstResult
    from profplug.analyzers.whatif.result import WhatIfResult


def render_whatif_html(res: WhatIfResult, out: TextIO) -> None:
    """Write the what-if section: per rank times, idle by cause, assumptions, warnings."""
    what = e(res.dropped())
    target = figures.own_target(res)
    note = f'<p class="note">{e(res.drop_note)}</p>' if res.drop_note else ""
    rows = "".join(
        f"<tr><td>{r.rank}</td><td>{e(r.basis)}</td><td>{r.recorded_us:,.1f}</td>"
        f"<td>{r.replayed_us:,.1f}</td><td>{r.model_error_pct:+.1f}%</td>"
        f"<td>{r.predicted_us:,.1f} &plusmn; "
        + ("n/a (peer ranks missing)" if figures.band_pct(r, target) is None
           else f"{figures.band_pct(r, target):.1f}%")
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
    from profplug.analyzers.whatif.finding import finding

    lead = f'<p class="finding">{e(finding(res))}</p>' if res.ranks else ""
    bound = "".join(
        f"<li>rank {r.rank}: {r.bound_us:,.1f} us (its own host {r.host_cadence_us:,.1f})"
        + (f"; binds: the replay gave {r.replay_predicted_us:,.1f}" if r.bound_binds else "")
        + "</li>"
        for r in res.ranks if r.bound_us > 0)
    out.write(
        f'<section class="whatif"><h2>What if: without {what}</h2>{lead}{note}'
        + (f'<ul class="warn">{warnings}</ul>' if warnings else "")
        + f"<p>{res.n_events:,} events replayed in {res.replay_s:.2f} s. Times in us per "
        "step (the median over the non-outlier steps; or per GPU window). saving = recorded "
        "&minus; predicted, direct = GPU idle in the dropped syncs, indirect = saving "
        "&minus; direct (docs/costs.md). Model error: the replay of the trace as recorded vs the "
        "trace. &plusmn;: the prediction's band for "
        f"{e(figures.TARGET_WORDS[target])} (replay error plus the measured "
        "validation, by how host-bound the predicted run is).</p>"
        "<table><thead><tr><th>rank</th><th>per</th><th>recorded</th><th>replayed</th>"
        "<th>model error</th><th>predicted</th><th>saving</th><th>direct</th>"
        f"<th>indirect</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<h3>GPU idle by cause, recorded &rarr; predicted</h3><table><thead><tr><th>rank</th>"
        f"{cause_hdr}</tr></thead><tbody>{causes}</tbody></table>"
        + (f"<h3>Data-flow bound (no step under the slowest coupled host's cadence, us)"
           f"</h3><ul>{bound}</ul>" if bound else "")
        +
        f"<details><summary>Assumptions</summary><ul>{assumptions}</ul></details>"
        "</section>")


def render_against_html(res: AgainstResult, out: TextIO) -> None:
    """``whatif --against``'s section: per rank the predicted step, its band for a separate
    traced run, the measured step, the error and whether it is inside, then each rank's
    segments, largest difference first (``whatif/against.py``)."""

    def n(x: float | None) -> str:
        return "-" if x is None else f"{x:,.1f}"

    rows = "".join(
        f"<tr><td>{r.rank}</td><td>{n(r.predicted_us)}"
        + ("" if r.band_pct is None else f" &plusmn; {r.band_pct:.1f}%") + "</td>"
        f"<td>{n(r.measured_us)}</td><td>"
        + ("-" if r.error_pct is None else f"{r.error_pct:+.1f}%") + "</td><td>"
        + ("-" if r.inside is None else ("yes" if r.inside else "no"))
        + f"</td><td>{n(r.predicted_host_us)}</td><td>{n(r.measured_host_us)}</td>"
        f"<td>{r.n_steps}</td></tr>" for r in res.ranks)
    segs = "".join(
        f"<h3>rank {r.rank}</h3><p>{e(r.finding() or '')}</p><table><thead><tr>"
        "<th>predicted</th><th>measured</th><th>diff</th><th>segment</th></tr></thead><tbody>"
        + "".join(f"<tr><td>{n(s.predicted_us)}</td><td>{n(s.measured_us)}</td>"
                  f"<td>{s.diff_us:+,.1f}</td><td>{e(s.where(r.repeated))}</td></tr>"
                  for s in r.top()) + "</tbody></table>"
        for r in res.ranks if r.segments)
    warnings = "".join(f"<li>{e(x)}</li>" for x in res.warnings)
    out.write(
        f'<section class="against"><h2>Against {e(res.label)} (measured)</h2>'
        + (f'<ul class="warn">{warnings}</ul>' if warnings else "")
        + "<p>Times in us per step (the report's step time, the GPU period; host: step start "
        "to the next step's start; medians over the steady steps lined up by index). "
        f"&plusmn;: the band for {e(figures.TARGET_WORDS[figures.Target.TRACED])}, which "
        "inside judges.</p><table><thead><tr><th>rank</th><th>predicted</th><th>measured</th>"
        "<th>error</th><th>inside</th><th>host predicted</th><th>host measured</th>"
        f"<th>steps</th></tr></thead><tbody>{rows}</tbody></table>{segs}</section>")
