"""Which host call holds a gap's start: calls sorted by start once, matched against the gaps
of each device in turn (all times int64 ns)."""

from __future__ import annotations

import numpy as np
from profplug.analyzers.stalls.rangequery import last_at_least

_NO_CALL = np.full(4096, -1, dtype=np.int64)  # "no call" for up to this many gaps (read only)
_NO_CALL.flags.writeable = False


class SortedCalls:
    """Calls [start, end] (ns, any order), sorted by start once for many :meth:`match`es."""

    def __init__(self, c_start: np.ndarray, c_end: np.ndarray) -> None:
        if c_start.size == 0:  # nothing to match (often: no event syncs, no closing sync)
            self.order = self.s = self.e = self.reach = c_start
            return
        self.order = np.argsort(c_start, kind="stable")
        self.s, self.e = c_start[self.order], c_end[self.order]
        self.reach = np.maximum.accumulate(self.e) if self.e.size else self.e

    def match(self, gap_start: np.ndarray, tol: int) -> np.ndarray:
        """Per gap, the index (into the calls as given) of a call whose [start-tol, end+tol]
        holds the gap's start (ns), else -1; among several, the latest-starting one."""
        if self.s.size == 0 or gap_start.size == 0:
            return _NO_CALL[:gap_start.size] if gap_start.size <= _NO_CALL.size else \
                np.full(gap_start.size, -1, dtype=np.int64)
        out = np.full(gap_start.size, -1, dtype=np.int64)
        order, s, e, reach = self.order, self.s, self.e, self.reach
        i = s.searchsorted(gap_start + tol, side="right") - 1
        ok = i >= 0
        ii = np.maximum(i, 0)  # i >= -1
        lo = gap_start - tol  # x + tol >= gap start, as x >= gap start - tol (no overflow:
        covered = ok & (reach[ii] >= lo)  # times within +-2^62 ns)
        direct = covered & (e[ii] >= lo)
        out[direct] = order[ii[direct]]
        late = (covered & ~direct).nonzero()[0]  # an earlier, longer call holds it (rare)
        if late.size:  # the latest-starting of those: O(log n) each, not a walk back
            k = last_at_least(e, ii[late], gap_start[late] - tol)
            out[late] = np.where(k >= 0, order[np.maximum(k, 0)], -1)
        return out
