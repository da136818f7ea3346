"""Call sites: the innermost annotation enclosing a host API call, on the same thread.

A profplug phase range (``profplug.wait``, ``profplug.sync.device``...) says what happens, not
where, so when it is the innermost range the call site is ``"<parent> > <phase>"``.
Calls inside no annotation are ``"unannotated"``.
"""

from __future__ import annotations

import numpy as np

from profplug.ranges import PHASES

from .timeline import Timeline

UNANNOTATED = "unannotated"


def enclosing(tl: Timeline, start_ns: np.ndarray, end_ns: np.ndarray, tid: np.ndarray
              ) -> list[str]:
    """Call-site label for each call given by (start, end, thread)."""
    out = [UNANNOTATED] * int(start_ns.size)
    if tl.ann_start_ns.size == 0 or start_ns.size == 0:
        return out
    names = tl.names
    for t in np.unique(tid):
        sel_ann = np.nonzero(tl.ann_tid == t)[0]
        if sel_ann.size == 0:
            continue
        order = sel_ann[np.argsort(tl.ann_start_ns[sel_ann], kind="stable")]
        a_s = tl.ann_start_ns[order]
        a_e = tl.ann_end_ns[order]
        a_n = tl.ann_name[order]
        for k in np.nonzero(tid == t)[0]:
            s, e = start_ns[k], end_ns[k]
            chain = _containing(a_s, a_e, s, e, limit=2)
            if not chain:
                continue
            inner = names[a_n[chain[0]]]
            if inner in PHASES and len(chain) > 1:
                inner = f"{names[a_n[chain[1]]]} > {inner}"
            out[k] = inner
    return out


def _containing(a_s: np.ndarray, a_e: np.ndarray, s: int, e: int, limit: int) -> list[int]:
    """Indices of ranges containing [s, e], innermost first (latest start first)."""
    i = int(np.searchsorted(a_s, s, side="right")) - 1
    found: list[int] = []
    scanned = 0
    while i >= 0 and len(found) < limit and scanned < 10_000:
        if a_e[i] >= e:
            found.append(i)
        i -= 1
        scanned += 1
    return found
