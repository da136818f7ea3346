"""The drain made visible: how far the host runs ahead of the GPU, per rank and per step.

- **host lead** of a GPU op: its start minus the start of the host call that launched it
  (same correlation id). A host that runs ahead (event-based waits) launches long before the
  GPU gets there: large leads. After a device-wide synchronize the queue is empty and every
  op starts right after its launch: the lead collapses to the launch latency.
- **launch-queue depth** at time t: GPU ops launched (their launching call has started) but
  not finished. A device-wide synchronize empties it; event waits keep ops queued.

Per complete step (``per_step.step_spans``), on the rank's own clock: the median lead of the
ops that started in the step's span, the time-weighted mean and the maximum queue depth in
the span, and the time the queue was empty. Per rank: the same over the GPU window. Ops with
no launching call in the trace count in neither. Times int64 ns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline, at_or, launch_calls
from profplug.analyzers.stalls.per_step import StepSpans


@dataclass
class Queue:
    """The launch-queue depth as a step function: ``depth[i]`` holds on [t[i], t[i+1])."""

    t: np.ndarray
    depth: np.ndarray

    def at(self, x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.t, x, side="right") - 1
        return at_or(self.depth, k, 0)

    def _integral(self, weight: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Integral over [lo, hi) windows of the step function holding ``weight[i]`` on
        [t[i], t[i+1]) (0 before the first event)."""
        if self.t.size == 0:
            return np.zeros(np.shape(lo), dtype=np.float64)
        w = weight.astype(np.float64)
        area = np.concatenate(([0.0], np.cumsum(w[:-1] * np.diff(self.t))))

        def upto(x: np.ndarray) -> np.ndarray:
            k = np.searchsorted(self.t, x, side="right") - 1
            kk = np.maximum(k, 0)
            return np.where(k >= 0, area[kk] + w[kk] * (x - self.t[kk]), 0.0)

        between: np.ndarray = upto(np.asarray(hi)) - upto(np.asarray(lo))
        return between

    def mean(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        span = np.maximum(np.asarray(hi) - np.asarray(lo), 1)
        mean: np.ndarray = self._integral(self.depth, lo, hi) / span
        return mean

    def empty_ns(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        empty: np.ndarray = np.rint(self._integral((self.depth == 0).astype(np.int64), lo, hi)
                                    ).astype(np.int64)
        return empty

    def max(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        out = np.zeros(np.shape(lo), dtype=np.int64)
        if self.t.size == 0:
            return out
        a = np.searchsorted(self.t, lo, side="right") - 1
        b = np.searchsorted(self.t, hi, side="left")
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
            seg = self.depth[max(x, 0):max(y, x + 1)]
            out[i] = int(seg.max()) if seg.size else 0
        return out


@dataclass
class RankDrain:
    """One rank's host lead and launch-queue depth (ns, depth in ops)."""

    rank: int
    lead_p50_ns: float | None
    depth_mean: float
    empty_ns: int
    window_ns: int
    steps_lead_p50_ns: list[float | None]
    steps_depth_mean: np.ndarray
    steps_depth_max: np.ndarray
    steps_empty_ns: np.ndarray
    queue: Queue


def rank_drain(tl: Timeline, spans: StepSpans, memo: Memo | None = None) -> RankDrain:
    calls = launch_calls(tl, memo)
    linked = calls >= 0
    launch = tl.api_start_ns[calls[linked]]  # (a rank may have no host calls at all)
    start, end = tl.gpu_start_ns[linked], tl.gpu_end_ns[linked]
    lead = start - launch
    t = np.concatenate([launch, end])
    d = np.concatenate([np.ones(launch.size, np.int64), -np.ones(end.size, np.int64)])
    order = np.lexsort((d, t))  # at one instant, ends before launches
    q = Queue(t[order], np.cumsum(d[order]))
    lo = np.array([tl.gpu_start_ns.min()]) if tl.n_gpu else np.zeros(1, np.int64)
    hi = np.array([tl.gpu_end_ns.max()]) if tl.n_gpu else np.zeros(1, np.int64)
    s_lo, s_hi = spans.span_s, spans.span_e
    by_step: list[float | None] = []
    if s_lo.size:
        k = np.searchsorted(s_lo, start, side="right") - 1
        inside = (k >= 0) & (start < s_hi[np.maximum(k, 0)])
        for i in range(s_lo.size):
            x = lead[inside & (k == i)]
            by_step.append(float(np.median(x)) if x.size else None)
    return RankDrain(
        rank=tl.rank, lead_p50_ns=float(np.median(lead)) if lead.size else None,
        depth_mean=float(q.mean(lo, hi)[0]), empty_ns=int(q.empty_ns(lo, hi)[0]),
        window_ns=int(hi[0] - lo[0]), steps_lead_p50_ns=by_step,
        steps_depth_mean=q.mean(s_lo, s_hi), steps_depth_max=q.max(s_lo, s_hi),
        steps_empty_ns=q.empty_ns(s_lo, s_hi), queue=q)
