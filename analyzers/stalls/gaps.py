"""GPU busy/idle intervals of one device, and the idle gaps of a rank with their causes.

All times int64 ns. ``busy`` is the union of GPU work intervals; an idle gap is a maximal
interval inside the window (first work start .. last work end) with no work running.
``stalls`` charges every gap to one of ``CAUSES`` (``Gaps``); ``steps`` and the renderers
read them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from profplug.analyzers.stalls import intervals

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
    """One device's GPU window, busy time and idle gaps (int64 ns; gaps sorted)."""

    window_start_ns: int
    window_end_ns: int
    busy_ns: int
    gap_start_ns: np.ndarray
    gap_end_ns: np.ndarray

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
        return intervals.within(self.gap_start_ns, self.gap_end_ns, start, end)


def device_intervals(start_ns: np.ndarray, end_ns: np.ndarray) -> DeviceIntervals:
    """Busy time and idle gaps of one device's GPU work (ns; any order, any overlap): the
    union of the ops, a zero-length op included (``intervals.union``'s ``points``)."""
    busy_s, busy_e = intervals.union(start_ns, end_ns, points=True)
    if busy_s.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return DeviceIntervals(0, 0, 0, z, z)
    gap_start, gap_end = intervals.holes(busy_s, busy_e)
    window_start, window_end = int(busy_s[0]), int(busy_e[-1])
    idle = int((gap_end - gap_start).sum())
    return DeviceIntervals(window_start, window_end, (window_end - window_start) - idle,
                           gap_start, gap_end)
