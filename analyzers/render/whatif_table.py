"""Terminal table of a what-if: one row per rank, then idle by cause, assumptions, warnings.

Fits an 80-column terminal. Times in us per step (or per GPU window when there are no steps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.render.text import wrap
from profplug.analyzers.whatif import figures

if TYPE_CHECKING:
    from profplug.analyzers.whatif.result import WhatIfResult

WIDTH = 80


def _n(x: float) -> str:
    return f"{x if abs(x) >= 0.05 else 0.0:,.1f}"


def _band(pct: float | None) -> str:
    """The band's +-%, "n/a" where it is withheld (peer ranks missing)."""
    return "n/a" if pct is None else f"{pct:.1f}"


def _wrap(text: str, first: str, indent: str) -> list[str]:
    return wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent)


def render_whatif_table(res: WhatIfResult, out: TextIO, lead: bool = True) -> None:
    """The terminal view: one row per rank, then idle by cause, assumptions, warnings.
    ``lead``: the finding first (not in a report, whose headline it is already)."""
    w = out.write
    _head(res, w, lead)
    _rank_rows(res, w)
    _rank_notes(res, w)
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


def _head(res: WhatIfResult, w: Callable[[str], object], lead: bool = True) -> None:
    """The finding, what was dropped, the warnings (first: they say how far to trust what
    follows), the drop note and the replay's size and time."""
    from profplug.analyzers.whatif.finding import finding

    if res.ranks and lead:  # the finding first, in the report's words
        for line in _wrap(finding(res), "", ""):
            w(line + "\n")
        w("\n")
    lines = [*_wrap(f"profplug what-if: without {res.dropped()}", "", "  "),
             *warning_lines(res)]
    if res.drop_note:
        lines += _wrap(res.drop_note, "note: ", "  ")
    for line in lines:
        w(line + "\n")
    w(f"{res.n_events:,} events replayed in {res.replay_s:.2f} s; err = the replay of the "
      "trace as\nrecorded vs the trace itself\n\n")


def _rank_rows(res: WhatIfResult, w: Callable[[str], object]) -> None:
    """One row per rank (us per step or window), and what the columns are."""
    target = figures.own_target(res)
    w(f"{'rank':>4} {'per':>4} {'recorded':>8} {'replayed':>8} {'err%':>5} "
      f"{'predicted':>9} {'+-%':>5} {'saving':>8} {'%':>4} {'direct':>7} {'indirect':>8}\n")
    for r in res.ranks:
        per = "step" if r.basis == "step" else "win"
        w(f"{r.rank:>4} {per:>4} {_n(r.recorded_us):>8} {_n(r.replayed_us):>8} "
          f"{r.model_error_pct:>+5.1f} {_n(r.predicted_us):>9} "
          f"{_band(figures.band_pct(r, target)):>5} "
          f"{_n(r.saving_us):>8} {r.saving_pct:>4.0f} {_n(r.direct_us):>7} "
          f"{_n(r.indirect_us):>8}\n")
    recorded = ("recorded: the given unprofiled step; " if res.calibrated_on_us is not None
                else "")
    for line in _wrap(
            f"(us per step: the median over the non-outlier steps; or per GPU window when the "
            f"trace has no steps; {recorded}+-%: the band for {figures.TARGET_WORDS[target]}, "
            "from the replay error and the measured validation, docs/whatif.md; saving = "
            "recorded - predicted, direct = idle in the dropped syncs, indirect = saving - "
            "direct: docs/costs.md)", "", ""):
        w(line + "\n")


def _rank_notes(res: WhatIfResult, w: Callable[[str], object]) -> None:
    """The data-flow bound, the band for a separate run and the idle between steps (us)."""
    lines: list[str] = []
    stepped = [r for r in res.ranks if r.bound_us > 0]
    if stepped:
        text = "; ".join(
            f"rank {r.rank} {_n(r.bound_us)} (own host {_n(r.host_cadence_us)})"
            + (f", binds: the replay gave {_n(r.replay_predicted_us)}" if r.bound_binds else "")
            for r in stepped)
        lines += _wrap(f"{text} (docs/whatif.md, \"The data-flow bound\")",
                       "data-flow bound: ", "  ")
    if res.calibrated_on_us is None and all(r.error_band_pct for r in res.ranks):
        text = ", ".join(f"rank {r.rank} +-{r.error_band_pct:.1f}%" for r in res.ranks)
        lines += _wrap(f"{text} (a run at this trace's host speed; a separate run draws its "
                       "own)", f"band for {figures.TARGET_WORDS[figures.Target.REPLAY]}: ",
                       "  ")
    for r in res.ranks:
        if r.between_steps_idle_us:
            lines += _wrap(f"rank {r.rank}: {_n(r.between_steps_idle_us)} us in the "
                           "recorded run's outlier steps beyond the step time (a pause "
                           "between groups of steps, a slow first step): not step time, "
                           "not in the prediction", "between steps: ", "  ")
    for line in lines:
        w(line + "\n")


def warnings_of(res: WhatIfResult) -> list[str]:
    """The what-if's warnings, the model's own error first when it is large."""
    out = []
    if res.max_model_error_pct > 5.0:
        out.append(f"the replay of the trace as recorded is off by up to "
                   f"{res.max_model_error_pct:.1f}%: treat the prediction with care")
    return out + list(res.warnings)


def warning_lines(res: WhatIfResult) -> list[str]:
    return [line for msg in warnings_of(res) for line in _wrap(msg, "warning: ", "  ")]
