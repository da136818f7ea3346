"""The what-if's per-step figures, read the way the report reads them (docs/costs.md).

The recorded step is the report's step time (``StepStats.period_us``: the median of the
per-step GPU periods over the non-outlier steps, ``stepstats``), so ``report``, ``whatif``
and ``ab`` print one step time for one run. The predicted step is the same statistic of the
replayed run's per-step periods over the *recorded* run's basis (the same steps: a step that
was an outlier as recorded stays out of the prediction). *direct* is the same statistic of
the per-step GPU idle charged to the dropped calls. Without steps: the GPU window, and
direct is the whole window's.
"""

from __future__ import annotations

import numpy as np

from .. import stepstats
from ..stalls import RankStalls
from ..steps import per_step_ns


def has_steps(rs: RankStalls) -> bool:
    return rs.steps is not None and rs.steps.n_steps > 0


def step_ns(rs: RankStalls, basis: str, recorded: RankStalls | None = None) -> float:
    """The step (basis "step") or the GPU window, in ns; ``recorded``: the run whose basis
    (non-outlier steps) the statistic is taken over (default: ``rs``'s own)."""
    if basis != "step" or not has_steps(rs):
        return rs.total("window_us") * 1000.0
    s = rs.steps
    assert s is not None
    ref = recorded.steps if recorded is not None and has_steps(recorded) else None
    if ref is None or len(ref.period_us_per_step) != len(s.period_us_per_step):
        return s.period_us * 1000.0
    return stepstats.center(s.period_us_per_step, ref.basis()) * 1000.0


def direct_ns(rs: RankStalls, basis: str, charged: np.ndarray) -> float:
    """GPU idle per step (or per window) in the gaps ``charged`` (a mask over ``rs.gaps``)."""
    g = rs.gaps
    dur = np.where(charged, g.end_ns - g.start_ns, 0)
    if basis != "step" or not has_steps(rs):
        return float(dur.sum())
    assert rs.steps is not None
    per = per_step_ns(rs.step_starts_ns, rs.step_ends_ns, g.start_ns, dur)
    return stepstats.center(per.astype(np.float64), rs.steps.basis())
