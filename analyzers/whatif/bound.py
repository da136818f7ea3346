"""The data-flow bound of a prediction: no step shorter than the host work it needs.

The replay keeps each host's own work (the host time between CUDA calls, the calls' own
costs) as recorded; only blocking changes. So in the predicted run each rank's host still
needs, per step, the time its replayed step ranges take from one step's start to the next:
its **host cadence** (us, the median over the recorded run's non-outlier steps,
``step_figures.end_basis``). The GPU cannot finish steps faster than a host issues them for
long: a step figure under the cadence is a backlog draining (the host ran ahead while a
peer was away, then the GPU works off the queue at GPU speed), not a step the run keeps.

Ranks whose NCCL kernels are paired (a pipeline, tensor parallel groups) hand data to each
other every step, so they run at one step rate: the slowest host's. The bound of a rank is
then the largest cadence over the coupled ranks, never above the rank's recorded step
(removing a wait cannot slow a replay); ranks that are not coupled keep their own.

``apply_bound`` raises each rank's ``predicted_us`` to its bound where the replay went under
it and says so (``bound_binds``; the replay's own figure stays in ``replay_predicted_us``).
"""

from __future__ import annotations

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.stalls.rank import RankResult
from profplug.analyzers.steps import stats
from profplug.analyzers.whatif import step_figures
from profplug.analyzers.whatif.result import RankWhatIf

# a bound that raises the replay's figure by less than this share of it is the two medians'
# own noise (the host's and the GPU's periods of one step), not a binding bound
BINDS_PCT = 2.0


def host_cadence_us(predicted: Timeline, recorded: RankResult) -> float:
    """The median (over ``recorded``'s non-outlier steps) of the predicted timeline's
    start-to-start step periods on the host, us; 0.0 without at least 3 steps."""
    s = np.sort(predicted.step_start_ns)
    if s.size < 3 or not step_figures.has_steps(recorded):
        return 0.0
    per = np.diff(s).astype(np.float64)
    keep = step_figures.end_basis(recorded)
    if keep.size != per.size:  # incomplete steps among the ranges: every period
        keep = np.ones(per.size, dtype=bool)
    return round(stats.center(per, keep) / 1000.0, 3)


def apply_bound(ranks: list[RankWhatIf], coupled: bool) -> None:
    """Hold each rank's prediction to its bound, in place (see the module docstring)."""
    stepped = [r for r in ranks if r.basis == Basis.STEP and r.host_cadence_us > 0]
    shared = max((r.host_cadence_us for r in stepped), default=0.0)
    for r in ranks:
        r.replay_predicted_us = r.predicted_us
        if r not in stepped:
            continue
        r.bound_us = round(min(shared if coupled else r.host_cadence_us, r.recorded_us), 3)
        if r.bound_us > r.predicted_us * (1.0 + BINDS_PCT / 100.0):
            _raise_to(r, r.bound_us)


def _raise_to(r: RankWhatIf, us: float) -> None:
    r.bound_binds = True
    r.predicted_us = us
    saving = r.recorded_us - us
    r.saving_us = round(saving, 3)
    r.saving_pct = round(100.0 * saving / r.recorded_us, 2) if r.recorded_us else 0.0
    r.indirect_us = round(saving - r.direct_us, 3)


def bound_note(ranks: list[RankWhatIf]) -> str | None:
    """One line for the output when the bound binds on any rank, else None."""
    hit = [r for r in ranks if r.bound_binds]
    if not hit:
        return None
    rs = ", ".join(f"rank {r.rank} {r.replay_predicted_us:,.0f} -> {r.predicted_us:,.0f} us"
                   for r in hit)
    return ("data-flow bound: the replay's step went under the host work a step needs "
            f"(the slowest coupled rank's host cadence); held to it: {rs}. The replay's "
            "figure was a backlog draining after a host ran ahead, not a step the run keeps "
            "(docs/whatif.md, \"The data-flow bound\")")
