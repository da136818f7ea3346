"""GPU busy/idle intervals of one device, and the idle gaps of a rank with their causes.

All times int64 ns. ``busy`` is the union of GPU work intervals; an idle gap is a maximal
interval inside the window (first work start .. last work end) with no work running.
``stalls`` charges every gap to one of ``CAUSES`` (``Gaps``); ``steps`` and the renderers
read them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

CAUSES = ("device_sync", "event_sync", "host_bound", "other")
C_DEVICE, C_EVENT, C_HOST, C_OTHER = range(4)


@dataclass
class Gaps:
    """Every idle gap of a rank (columnar): start/end ns, device, cause id, charged call."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    device: np.ndarray
    cause: np.ndarray  # index into CAUSES
    call: np.ndarray  # index into the rank's sync calls (RankResult.call_*), -1 none
    # per device, the gaps left out of these rows (:func:`longest`): their count and their
    # summed duration (ns); empty: every gap is here
    left: dict[int, tuple[int, int]] = field(default_factory=dict)


_NONE = np.zeros(0, dtype=np.int64)
NO_GAPS = Gaps(_NONE, _NONE, _NONE, _NONE, _NONE)  # a rank's gaps where they are not used


def longest(g: Gaps, k: int) -> Gaps:
    """``g`` with at most ``k`` gaps per device: the longest (ties: the earlier row), in
    their order; the rest counted in ``left``. What a page draws of a rank (it draws the
    longest of each device's gaps, at most ``render.timeline_data.MAX_GAPS_PER_ROW``), so
    that a page's report holds no more than that of any rank (docs/scale.md)."""
    devices, counts = np.unique(g.device, return_counts=True)
    if not (counts > k).any():
        return g
    keep = np.ones(g.device.size, dtype=bool)
    left = dict(g.left)
    dur = g.end_ns - g.start_ns
    for dev in devices[counts > k].tolist():
        rows = np.nonzero(g.device == dev)[0]
        out = rows[np.argsort(-dur[rows], kind="stable")[k:]]
        keep[out] = False
        n0, ns0 = left.get(dev, (0, 0))
        left[dev] = (n0 + int(out.size), ns0 + int(dur[out].sum()))
    return replace(g, start_ns=g.start_ns[keep], end_ns=g.end_ns[keep], device=g.device[keep],
                   cause=g.cause[keep], call=g.call[keep], left=left)


@dataclass
class Spans:
    """Disjoint time spans of a rank (columnar, int64 ns, sorted per device): its NCCL time
    (``RankResult.comm``), its NCCL peer wait (``crossrank.bubbles``); drawn by the page's
    timeline in their quantity's colour."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    device: np.ndarray

    @classmethod
    def empty(cls) -> Spans:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z)

    @classmethod
    def join(cls, parts: list[tuple[int, np.ndarray, np.ndarray]]) -> Spans:
        """Spans from (device, start, end) parts."""
        if not parts:
            return cls.empty()
        return cls(np.concatenate([s for _, s, _ in parts]).astype(np.int64),
                   np.concatenate([e for _, _, e in parts]).astype(np.int64),
                   np.concatenate([np.full(s.size, d, dtype=np.int64) for d, s, _ in parts]))


@dataclass
class DeviceIntervals:
    window_start_ns: int
    window_end_ns: int
    busy_ns: int
    gap_start_ns: np.ndarray  # int64, sorted
    gap_end_ns: np.ndarray
    gap_after_op: np.ndarray  # index (into the device's sorted ops) of the op ending the gap

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    def busy_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """The busy time as disjoint sorted spans (start, end): the window less the gaps."""
        if self.window_end_ns <= self.window_start_ns:
            z = np.zeros(0, dtype=np.int64)
            return z, z
        return (np.concatenate(([self.window_start_ns], self.gap_end_ns)).astype(np.int64),
                np.concatenate((self.gap_start_ns, [self.window_end_ns])).astype(np.int64))

    def idle_within(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Idle ns (sum of gap overlap) inside each interval [start, end)."""
        gs, ge = self.gap_start_ns, self.gap_end_ns
        if gs.size == 0:
            return np.zeros(np.shape(start), dtype=np.int64)
        cum = np.concatenate(([0], np.cumsum(ge - gs)))

        def idle_before(t: np.ndarray) -> np.ndarray:
            # idle time in [-inf, t): full gaps ending before t, plus the part of one gap
            i = np.searchsorted(ge, t, side="right")  # gaps fully before t
            full = cum[i]
            j = np.minimum(i, gs.size - 1)
            partial = np.where((i < gs.size) & (gs[j] < t), t - gs[j], 0)
            return full + partial

        s = np.asarray(start, dtype=np.int64)
        e = np.maximum(np.asarray(end, dtype=np.int64), s)
        return idle_before(e) - idle_before(s)


def device_intervals(start_ns: np.ndarray, end_ns: np.ndarray) -> DeviceIntervals:
    """Busy time and idle gaps of one device's GPU work (any order, any overlap)."""
    if start_ns.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return DeviceIntervals(0, 0, 0, z, z, z)
    order = start_ns.argsort(kind="stable")
    s = start_ns[order]
    e = np.maximum(end_ns[order], s)
    reach = np.maximum.accumulate(e)  # latest end among ops started so far
    prev_reach = reach[:-1]
    is_gap = s[1:] > prev_reach
    gap_idx = np.nonzero(is_gap)[0] + 1  # op that ends each gap
    gap_start = prev_reach[gap_idx - 1]
    gap_end = s[gap_idx]
    window_start, window_end = int(s[0]), int(reach[-1])
    idle = int((gap_end - gap_start).sum())
    return DeviceIntervals(window_start, window_end, (window_end - window_start) - idle,
                           gap_start.astype(np.int64, copy=False),
                           gap_end.astype(np.int64, copy=False), order[gap_idx])
