"""Interval arithmetic on int64 ns arrays: unions, the holes between them, differences, and how much of a
union lies in windows. ``gaps.device_intervals`` (a device's busy time and idle gaps) and
``crossrank.bubbles`` build on these."""

from __future__ import annotations

import numpy as np

I64 = np.int64


def union(start: np.ndarray, end: np.ndarray, *, points: bool = False
          ) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [start, end) (ns, any order, any overlap) as disjoint, sorted
    intervals. Empty ones are dropped; ``points``: kept (an end before its start read as the
    start), so that a zero-length op at t still bounds the idle around it: [0, 5) [7, 7)
    [9, 12) gives [0, 5) [7, 7) [9, 12), the idle being 5..7 and 7..9, not 5..9."""
    if points:
        s, e = start, np.maximum(end, start)
    else:
        keep = end > start
        s, e = start[keep], end[keep]
    if s.size == 0:
        z = np.zeros(0, dtype=I64)
        return z, z
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.nonzero(new)[0]
    last = np.append(first[1:], s.size) - 1
    return s[first].astype(I64), reach[last].astype(I64)


def holes(us: np.ndarray, ue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The holes between the disjoint sorted intervals (us, ue) (ns): from each one's end to
    the next one's start."""
    return ue[:-1], us[1:]


def difference(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the disjoint sorted intervals a not covered by the disjoint sorted
    intervals b, as disjoint sorted intervals."""
    if a_s.size == 0 or b_s.size == 0:
        return a_s.astype(I64), a_e.astype(I64)
    pts = np.unique(np.concatenate((a_s, a_e, b_s, b_e)))
    lo, hi = pts[:-1], pts[1:]

    def inside(s: np.ndarray, e: np.ndarray) -> np.ndarray:  # [lo, hi) within one of [s, e)
        i = np.searchsorted(s, lo, side="right") - 1
        return (i >= 0) & (hi <= e[np.maximum(i, 0)])

    keep = inside(a_s, a_e) & ~inside(b_s, b_e)
    return union(lo[keep], hi[keep])


def within(us: np.ndarray, ue: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per window [lo, hi), the length of the disjoint sorted intervals (us, ue) inside it."""
    lo = np.asarray(lo, dtype=I64)
    hi = np.maximum(np.asarray(hi, dtype=I64), lo)
    if us.size == 0:
        return np.zeros(lo.shape, dtype=I64)
    cum = np.concatenate(([0], np.cumsum(ue - us)))

    def before(t: np.ndarray) -> np.ndarray:  # covered length in (-inf, t)
        i = np.searchsorted(ue, t, side="right")  # intervals ending at or before t
        j = np.minimum(i, us.size - 1)
        part = np.where((i < us.size) & (us[j] < t), t - us[j], 0)
        return cum[i] + part

    covered: np.ndarray = before(hi) - before(lo)
    return covered
