"""Interval arithmetic on int64 ns arrays: unions, and how much of a union lies in windows."""

from __future__ import annotations

import numpy as np

I64 = np.int64


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [start, end) as disjoint, sorted intervals (empty ones dropped)."""
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


def measure(start: np.ndarray, end: np.ndarray) -> int:
    """Total length of the union of [start, end)."""
    s, e = union(start, end)
    return int((e - s).sum())


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

    return before(hi) - before(lo)
