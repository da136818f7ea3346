"""What-if results as values: dataclasses, ``to_dict`` (the JSON ``whatif`` key), an
80-column table and an HTML section. Times in us; percentages of the recorded time.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from ..render.text import PrintableWriter

SCHEMA_VERSION = 1
WIDTH = 80


@dataclass
class RankWhatIf:
    """One rank: recorded vs replayed vs predicted time per step (or per window), in us."""

    rank: int
    basis: str  # "step": mean step time over complete steps; "window": GPU window
    n_steps: int
    recorded_us: float  # measured in the trace
    replayed_us: float  # the model replaying the trace as recorded
    model_error_pct: float  # (replayed - recorded) / recorded * 100
    predicted_us: float  # the model replaying without the dropped synchronizes
    saving_us: float  # recorded - predicted
    saving_pct: float
    direct_us: float  # idle gaps that started inside a dropped call (stall analysis)
    indirect_us: float  # saving - direct: late launches after the queue drained
    dropped_calls: int  # calls made non-blocking (per step when basis is "step")
    recorded_idle_by_cause_us: dict[str, float]
    predicted_idle_by_cause_us: dict[str, float]


@dataclass
class WhatIfResult:
    drop: str  # device-sync | all-sync
    callsite: str | None
    ranks: list[RankWhatIf]
    assumptions: list[str]
    warnings: list[str] = field(default_factory=list)
    n_events: int = 0  # API calls + GPU ops replayed
    replay_s: float = 0.0  # wall time of both replays (model build included)
    max_model_error_pct: float = 0.0

    def rank(self, r: int) -> RankWhatIf:
        for x in self.ranks:
            if x.rank == r:
                return x
        raise KeyError(r)

    def to_dict(self) -> dict[str, Any]:
        """The ``whatif`` object of the JSON report (docs/whatif.md)."""
        return {"version": SCHEMA_VERSION, "drop": self.drop, "callsite": self.callsite,
                "n_events": self.n_events, "replay_s": round(self.replay_s, 3),
                "max_model_error_pct": round(self.max_model_error_pct, 2),
                "ranks": [asdict(r) for r in self.ranks],
                "assumptions": list(self.assumptions), "warnings": list(self.warnings)}


def _n(x: float) -> str:
    return f"{x if abs(x) >= 0.05 else 0.0:,.1f}"


def _wrap(text: str, first: str, indent: str) -> list[str]:
    import textwrap

    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent)


def render_table(res: WhatIfResult, out: TextIO) -> None:
    """The terminal view: one row per rank, then idle by cause, assumptions, warnings."""
    w = PrintableWriter(out).write  # call sites and warnings carry trace strings
    what = "device-wide synchronizes" if res.drop == "device-sync" else "blocking syncs"
    at = f" at {res.callsite}" if res.callsite else ""
    w(f"profplug what-if: replay without {what}{at}\n")
    w(f"{res.n_events:,} events replayed in {res.replay_s:.2f} s; err = the replay of the "
      "trace as\nrecorded vs the trace itself\n\n")
    w(f"{'rank':>4} {'per':>4} {'recorded':>9} {'replayed':>9} {'err %':>6} "
      f"{'predicted':>9} {'saving':>8} {'%':>5} {'direct':>8} {'indirect':>8}\n")
    for r in res.ranks:
        per = "step" if r.basis == "step" else "win"
        w(f"{r.rank:>4} {per:>4} {_n(r.recorded_us):>9} {_n(r.replayed_us):>9} "
          f"{r.model_error_pct:>+6.1f} {_n(r.predicted_us):>9} {_n(r.saving_us):>8} "
          f"{r.saving_pct:>5.1f} {_n(r.direct_us):>8} {_n(r.indirect_us):>8}\n")
    w("(us per step, or per GPU window when the trace has no steps)\n")
    w("\nGPU idle by cause, recorded -> predicted (us per step or window)\n")
    for r in res.ranks:
        parts = [f"{c} {_n(r.recorded_idle_by_cause_us.get(c, 0.0))}->{_n(v)}"
                 for c, v in r.predicted_idle_by_cause_us.items()]
        for line in _wrap(", ".join(parts), f"{r.rank:>4} ", "     "):
            w(line + "\n")
    w("\nassumptions\n")
    for a in res.assumptions:
        for line in _wrap(a, "- ", "  "):
            w(line + "\n")
    if res.max_model_error_pct > 5.0:
        w(f"\nwarning: the replay of the trace as recorded is off by up to "
          f"{res.max_model_error_pct:.1f}%: treat the prediction with care\n")
    for msg in res.warnings:
        for line in _wrap(msg, "warning: ", "  "):
            w(line + "\n")


def whatif_html_section(res: WhatIfResult) -> str:
    """A self-contained HTML ``<section>`` (no scripts) for the HTML report to embed."""
    e = html.escape
    what = "device-wide synchronizes" if res.drop == "device-sync" else "blocking syncs"
    at = f" at <code>{e(res.callsite)}</code>" if res.callsite else ""
    rows = "".join(
        f"<tr><td>{r.rank}</td><td>{e(r.basis)}</td><td>{r.recorded_us:,.1f}</td>"
        f"<td>{r.replayed_us:,.1f}</td><td>{r.model_error_pct:+.1f}%</td>"
        f"<td>{r.predicted_us:,.1f}</td><td>{r.saving_us:,.1f} ({r.saving_pct:.1f}%)</td>"
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
    warnings = "".join(f"<li>{e(x)}</li>" for x in res.warnings)
    return (
        f'<section class="whatif"><h2>What if: without {what}{at}</h2>'
        f"<p>{res.n_events:,} events replayed in {res.replay_s:.2f} s. Times in us per "
        "step (or per GPU window). Model error: the replay of the trace as recorded vs the "
        "trace.</p>"
        "<table><thead><tr><th>rank</th><th>per</th><th>recorded</th><th>replayed</th>"
        "<th>model error</th><th>predicted</th><th>saving</th><th>direct</th>"
        f"<th>indirect</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<h3>GPU idle by cause, recorded &rarr; predicted</h3><table><thead><tr><th>rank</th>"
        f"{cause_hdr}</tr></thead><tbody>{causes}</tbody></table>"
        f"<h3>Assumptions</h3><ul>{assumptions}</ul>"
        + (f"<h3>Warnings</h3><ul>{warnings}</ul>" if warnings else "")
        + "</section>")
