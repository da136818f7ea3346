"""Call sites: the innermost annotation enclosing a host API call, on the same thread.

A profplug phase range (``profplug.wait``, ``profplug.sync.device``...) says what happens, not
where, so when it is the innermost range the call site is ``"<parent> > <phase>"``.
Calls inside no annotation are ``"unannotated"``. A range's payload (``peer=1``, see
``profplug.ranges.split_payload``) is left out of the label, so a call site is one per range
whatever the peer.
"""

from __future__ import annotations

import numpy as np

from profplug.ranges import PHASES, PREFIX, without_payload

from .timeline import Timeline

UNANNOTATED = "unannotated"


def display_name(site: str) -> str:
    """A call site as the report prints it: without the ``profplug.`` prefixes."""
    return site.replace(PREFIX, "")


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
        parent = _prev_ending_later(a_e.tolist())
        firsts = np.searchsorted(a_s, start_ns, side="right") - 1
        for k in np.nonzero(tid == t)[0]:
            chain = _containing(a_e, parent, int(firsts[k]), int(end_ns[k]), limit=2)
            if not chain:
                continue
            inner = without_payload(names[a_n[chain[0]]])
            if inner in PHASES and len(chain) > 1:
                inner = f"{without_payload(names[a_n[chain[1]]])} > {inner}"
            out[k] = inner
    return out


def _prev_ending_later(a_e: list[int]) -> list[int]:
    """For each range i (sorted by start), the nearest j < i with end[j] >= end[i], or -1."""
    out = [-1] * len(a_e)
    stack: list[int] = []
    for i, end in enumerate(a_e):
        while stack and a_e[stack[-1]] < end:
            stack.pop()
        out[i] = stack[-1] if stack else -1
        stack.append(i)
    return out


def _containing(a_e: np.ndarray, parent: list[int], i: int, e: int, limit: int) -> list[int]:
    """Indices of ranges containing [s, e], innermost first (latest start first).

    ``i`` is the last range starting at or before s. A range ending before ``e`` is skipped
    together with every range between it and its ``parent`` (they end even earlier).
    """
    found: list[int] = []
    while i >= 0 and len(found) < limit:
        if a_e[i] >= e:
            found.append(i)
            i -= 1
        else:
            i = parent[i]
    return found
