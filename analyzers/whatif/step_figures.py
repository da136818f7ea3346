"""The what-if's per-step figures, read the way the report reads them (docs/costs.md).

- **recorded**: the report's step time (``StepStats.period_us``: the median of the per-step
  GPU periods over the non-outlier steps, ``steps.stats``), so ``report``, ``whatif`` and
  ``ab`` print one step time for one run.
- **replayed / predicted**: the recorded step less the median, over the recorded run's
  non-outlier steps, of how much the replay shortened each step. A step's change is taken end
  to end (the end of the last op it launched to the next step's), not first op to first op:
  in a replay without synchronizes the host runs ahead of the GPU, so a step's first op can be
  a NCCL receive that was launched (and started waiting) long before the step's work could
  run, while its last op still ends when the GPU is done with it. A replay that reproduces the
  trace changes no step: replayed = recorded.
- **direct**: the same statistic of the per-step GPU idle charged to the dropped calls.

Without steps: the GPU window, and direct is the whole window's.
"""

from __future__ import annotations

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.stalls.gaps import CAUSES, Gaps
from profplug.analyzers.stalls.per_step import per_step_ns, step_time
from profplug.analyzers.stalls.rank import RankResult
from profplug.analyzers.steps import stats


def has_steps(rs: RankResult) -> bool:
    return rs.steps is not None and rs.steps.n_steps > 0


def end_periods_ns(rs: RankResult) -> np.ndarray:
    """Per complete step from the second on: its last op's end minus the previous step's."""
    reach = np.maximum.accumulate(rs.step_last_ns)
    return (reach[1:] - reach[:-1]).astype(np.float64)  # np.diff


def end_basis(recorded: RankResult) -> np.ndarray:
    """Which end-to-end periods (:func:`end_periods_ns`) are in the basis: not those that
    overlap a recorded outlier step's period (step i's first op to step i+1's: the end-to-end
    periods of steps i and i+1)."""
    keep = np.ones(max(int(recorded.step_last_ns.size) - 1, 0), dtype=bool)
    if recorded.steps is not None and recorded.steps.outlier_steps:
        i = np.asarray(recorded.steps.outlier_steps, dtype=np.int64)
        out = np.concatenate([np.maximum(i - 1, 0), i])  # periods i-1 and i (clipped)
        keep[out[out < keep.size]] = False
    return keep


def step_ns(rs: RankResult, basis: Basis, recorded: RankResult | None = None) -> float:
    """The step (basis "step") or the GPU window, in ns, of the trace (``recorded`` None)
    or of a replay of ``recorded`` (see the module docstring)."""
    if basis != Basis.STEP or not has_steps(rs):
        return rs.total("window_us") * 1000.0
    if recorded is None or not has_steps(recorded):
        assert rs.steps is not None
        return rs.steps.period_us * 1000.0
    assert recorded.steps is not None and rs.steps is not None
    rec_ns = recorded.steps.period_us * 1000.0
    if rs.step_last_ns.size != recorded.step_last_ns.size or rs.step_last_ns.size < 2:
        return rec_ns - (recorded.steps.gpu_span_us_mean - rs.steps.gpu_span_us_mean) * 1000.0
    shorter = end_periods_ns(recorded) - end_periods_ns(rs)
    return rec_ns - stats.center(shorter, end_basis(recorded))


def replayed_ns(tl: Timeline, basis: Basis, recorded: RankResult) -> float:
    """:func:`step_ns` of a replayed timeline without its stall analysis: the figure needs
    only the replay's steps (their spans and last-op ends) or its GPU window, not the idle
    gaps by cause, so the replay as recorded is not analyzed a second time."""
    z = np.zeros(0, dtype=np.int64)
    steps, sp = step_time(tl, Gaps(z, z, z, z.astype(np.int8), z), CAUSES)
    window_us = 0.0
    for d in np.unique(tl.gpu_device):
        sel = tl.gpu_device == d
        window_us += round(float(int(tl.gpu_end_ns[sel].max()) - int(tl.gpu_start_ns[sel].min()))
                           / 1000.0, 3)
    if basis != Basis.STEP or steps is None or steps.n_steps == 0:
        return window_us * 1000.0
    if not has_steps(recorded):
        return steps.period_us * 1000.0
    assert recorded.steps is not None
    rec_ns = recorded.steps.period_us * 1000.0
    last = sp.last_e if sp is not None else z
    if last.size != recorded.step_last_ns.size or last.size < 2:
        return rec_ns - (recorded.steps.gpu_span_us_mean - steps.gpu_span_us_mean) * 1000.0
    shorter = end_periods_ns(recorded) - np.diff(np.maximum.accumulate(last)).astype(np.float64)
    return rec_ns - stats.center(shorter, end_basis(recorded))


def direct_ns(rs: RankResult, basis: Basis, charged: np.ndarray,
              blocked_ns: np.ndarray | None = None) -> float:
    """GPU idle per step (or per window) in the gaps ``charged`` (a mask over ``rs.gaps``).
    ``blocked_ns``: per sync call (``rs.call_*``), the time it blocked the host: the idle
    charged to one call is at most that (a gap that started inside a call and went on long
    after it returned is the host's own time beyond it, not the synchronize's), so direct
    never exceeds the time the dropped synchronizes blocked the host."""
    g = rs.gaps
    dur = np.where(charged, g.end_ns - g.start_ns, 0)
    if blocked_ns is not None and charged.any():
        dur = _capped(dur, g.call, charged, blocked_ns)
    if basis != Basis.STEP or not has_steps(rs):
        return float(dur.sum())
    assert rs.steps is not None
    per = per_step_ns(rs.step_starts_ns, rs.step_ends_ns, g.start_ns, dur)
    return stats.center(per.astype(np.float64), rs.steps.basis())


def _capped(dur: np.ndarray, call: np.ndarray, charged: np.ndarray, blocked_ns: np.ndarray
            ) -> np.ndarray:
    """``dur`` with each call's charged gaps scaled down so that they sum to at most the
    call's blocked time (whole ns)."""
    c = call[charged]
    total = np.bincount(c, dur[charged], minlength=blocked_ns.size).astype(np.float64)
    scale = np.ones(blocked_ns.size)
    over = total > blocked_ns
    scale[over] = np.maximum(blocked_ns[over], 0) / total[over]
    out = dur.copy()
    out[charged] = np.floor(dur[charged] * scale[c]).astype(dur.dtype)
    return out
