"""Call sites: the innermost annotation enclosing a host API call, on the same thread.

A profplug phase range (``profplug.wait``, ``profplug.sync.device``...) says what happens, not
where, so when it is the innermost range the call site is ``"<parent> > <phase>"``.
Calls inside no annotation are ``"unannotated"``. A range's payload (``peer=1``, see
``profplug.analyzers.core.ranges.split_payload``) is left out of the label, so a call site is one per range
whatever the peer.
"""

from __future__ import annotations

import numpy as np
from profplug.analyzers.core.ranges import PHASES, PREFIX, without_payload
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.stalls.rangequery import last_at_least

UNANNOTATED = "unannotated"


def display_name(site: str) -> str:
    """A call site as the report prints it: without the ``profplug.`` prefixes."""
    return site.replace(PREFIX, "")


def enclosing(tl: Timeline, start_ns: np.ndarray, end_ns: np.ndarray, tid: np.ndarray
              ) -> list[str]:
    """Call-site label for each call given by (start, end, thread).

    Annotations sorted by (thread, start); the innermost one enclosing a call is the
    latest-starting one of its thread (at or before the call's start) that ends at or after
    the call's end, and its parent the next such one before it: two :func:`last_at_least`
    lookups for all calls at once, O((ranges + calls) log(ranges + calls)) however deep the
    nesting and however many threads.
    """
    out = [UNANNOTATED] * int(start_ns.size)
    if tl.ann_start_ns.size == 0 or start_ns.size == 0:
        return out
    names = tl.names
    order = np.lexsort((tl.ann_start_ns, tl.ann_tid))  # stable: ties keep trace order
    a_t, a_e, a_n = tl.ann_tid[order], tl.ann_end_ns[order], tl.ann_name[order]
    # the last annotation of the call's thread starting at or before the call: merge
    # annotations and calls in (thread, start) order, annotations first on a tie
    n_a = order.size
    kind = np.concatenate([np.zeros(n_a, np.int8), np.ones(start_ns.size, np.int8)])
    merged = np.lexsort((kind, np.concatenate([tl.ann_start_ns[order], start_ns]),
                         np.concatenate([a_t, tid])))
    before = np.cumsum(merged < n_a)  # annotations up to each merged position
    firsts = np.empty(start_ns.size, dtype=np.int64)
    pos = np.nonzero(merged >= n_a)[0]
    firsts[merged[pos] - n_a] = before[pos] - 1
    lo = np.searchsorted(a_t, tid, side="left")  # the first annotation of the call's thread
    firsts[firsts < lo] = -1
    inner = last_at_least(a_e, firsts, end_ns)
    inner[inner < lo] = -1  # the latest such range is on an earlier thread: none on this one
    outer = last_at_least(a_e, inner - 1, end_ns)  # -1 -> -2: none
    outer[(inner < 0) | (outer < lo)] = -1
    # one label string per (range name, parent name): a 10 MB range name around 400 calls
    # is one string, not 400 copies (interned)
    labels: dict[tuple[int, int], str] = {}
    for k in np.nonzero(inner >= 0)[0].tolist():
        a = int(a_n[inner[k]])
        o = int(a_n[outer[k]]) if outer[k] >= 0 else -1
        label = labels.get((a, o))
        if label is None:
            label = without_payload(names[a])
            if label in PHASES and o >= 0:
                label = f"{without_payload(names[o])} > {label}"
            labels[(a, o)] = label
        out[k] = label
    return out
