"""Host side of the model (all times int64 ns): top-level calls, the host work a dropped call
takes with it, and the copies that block the host. ``costs.HostCosts`` scales the host costs
of the predicted run.

A synchronize is rarely called bare: profplug's patch makes every ``torch.cuda.synchronize()``
the range ``profplug.synchronize <file>:<line> <function>``, ``profplug.p2p`` wraps it in
``profplug.sync.device``, users wrap it in ``record_function``. That range, and the Python
that enters it, exist only because of the call; without the call they are gone too, and
this host work can cost more than the synchronize's own non-blocking time (``docs/whatif.md``,
Validation; figures: ``benchmarks/2026-12-03/README.md``), so it is dropped with the call.

Per dropped top-level call, on its host thread:

- its *own range*: the outermost annotation that encloses the call and no other top-level
  API call of the thread, with at most ``OWN_RANGE_MAX_NS`` of host time besides the call,
  a step range excepted (none: nothing around the call is cut);
- ``pre``: the own range's start to the call's start, plus the *entry*: the host time from the
  previous host event on the thread (the previous top-level call's end, an annotation's start
  or end) to the own range's start, at most the range's own overhead (its duration minus the
  call's): the path into the wrapper, bounded so that unrelated host work before a bare
  range is not cut;
- ``post``: the call's end to the own range's end.

The drop replay shortens the host gap before the call by ``pre`` and the gap after it by
``post`` (never below zero); the replay as recorded is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core.ranges import STEP
from profplug.analyzers.core.timeline import KIND_MEMCPY, Timeline, groups

I64_MAX, I64_MIN = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)

# An own range holds at most this much host time besides the call: several times what a
# wrapper costs on a slow host (benchmarks/2026-12-03/README.md); a range with more is a
# block of other work that happens to contain only this CUDA call, not a wrapper.
OWN_RANGE_MAX_NS = 100_000


def drop_cuts(tl: Timeline, threads: list[np.ndarray], dropped: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per API call (local index): ns cut from the host gap before / after it when dropped.

    ``threads``: the top-level calls of each host thread, in order.
    """
    n_calls = tl.api_start_ns.size
    pre_ns = np.zeros(n_calls, dtype=np.int64)
    post_ns = np.zeros(n_calls, dtype=np.int64)
    if not dropped.any() or tl.ann_start_ns.size == 0:
        return pre_ns, post_ns
    is_step = np.array([n == STEP or n.startswith("ProfilerStep#") for n in tl.names],
                       dtype=bool)
    step_range = is_step[tl.ann_name]  # a step is never a call's own range
    for calls in threads:
        at_dropped = np.nonzero(dropped[calls])[0]
        if at_dropped.size == 0:
            continue
        on_thread = tl.ann_tid == tl.api_tid[calls[0]]
        candidates = np.nonzero(on_thread & ~step_range)[0]
        if candidates.size == 0:
            continue
        by_start = candidates[np.argsort(tl.ann_start_ns[candidates], kind="stable")]
        ranges = _ThreadRanges(tl.ann_start_ns[by_start], tl.ann_end_ns[by_start], np.sort(
            np.concatenate([tl.ann_start_ns[on_thread], tl.ann_end_ns[on_thread]])))
        cuts = _thread_cuts(tl, calls, at_dropped, ranges)
        if cuts is not None:
            cut_calls, pre, post = cuts
            pre_ns[cut_calls], post_ns[cut_calls] = pre, post
    return pre_ns, post_ns


@dataclass(frozen=True)
class _ThreadRanges:
    """A host thread's annotations that may be a call's own range (no step), by start; and
    every annotation start and end of the thread, sorted (``bounds_ns``: its host events)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    bounds_ns: np.ndarray


def _thread_cuts(tl: Timeline, calls: np.ndarray, at_dropped: np.ndarray,
                 ranges: _ThreadRanges) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(calls cut, ``pre``, ``post``) for the dropped calls ``calls[at_dropped]`` of one
    thread that have an own range (see :func:`drop_cuts`); None: none has."""
    dropped = calls[at_dropped]
    last = calls.size - 1
    prev_end_ns = np.where(at_dropped > 0, tl.api_end_ns[calls[np.maximum(at_dropped - 1, 0)]],
                           I64_MIN)
    next_start_ns = np.where(at_dropped < last,
                             tl.api_start_ns[calls[np.minimum(at_dropped + 1, last)]], I64_MAX)
    own = _own_ranges(tl, dropped, prev_end_ns, next_start_ns, ranges)
    if own is None:
        return None
    owner, own_range = own
    cut_calls = dropped[owner]
    range_start_ns, range_end_ns = ranges.start_ns[own_range], ranges.end_ns[own_range]
    entry_ns = _entry_ns(tl, cut_calls, prev_end_ns[owner], range_start_ns, range_end_ns,
                         ranges.bounds_ns)
    return (cut_calls, tl.api_start_ns[cut_calls] - range_start_ns + entry_ns,
            range_end_ns - tl.api_end_ns[cut_calls])


def _own_ranges(tl: Timeline, dropped: np.ndarray, prev_end_ns: np.ndarray,
                next_start_ns: np.ndarray, ranges: _ThreadRanges
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per dropped call that has one, its own range: of the ranges that start between the
    previous call's end and the call's start (every (call, range) pair listed at once),
    those that end after the call and before the next one, with at most
    ``OWN_RANGE_MAX_NS`` of host time besides the call; the outermost. (index into
    ``dropped``, row of ``ranges``) per such call; None: no call has one."""
    call_start_ns, call_end_ns = tl.api_start_ns[dropped], tl.api_end_ns[dropped]
    first = np.searchsorted(ranges.start_ns, prev_end_ns, side="left")
    n_ranges = np.maximum(np.searchsorted(ranges.start_ns, call_start_ns, side="right") - first,
                          0)
    if not n_ranges.any():
        return None
    owner = np.repeat(np.arange(dropped.size), n_ranges)  # the ranges starting in the window
    row = (np.arange(int(n_ranges.sum())) - np.repeat(np.cumsum(n_ranges) - n_ranges, n_ranges)
           + np.repeat(first, n_ranges))
    call_ns = (call_end_ns - call_start_ns)[owner]
    end_ns = ranges.end_ns[row]
    fits = ((call_end_ns[owner] <= end_ns) & (end_ns <= next_start_ns[owner])
            & ((end_ns - ranges.start_ns[row]) - call_ns <= OWN_RANGE_MAX_NS))
    owner, row = owner[fits], row[fits]
    if owner.size == 0:
        return None
    order = np.lexsort((-ranges.end_ns[row], ranges.start_ns[row], owner))  # outermost first
    owner, row = owner[order], row[order]
    outermost = np.concatenate(([True], owner[1:] != owner[:-1]))
    return owner[outermost], row[outermost]


def _entry_ns(tl: Timeline, cut_calls: np.ndarray, prev_end_ns: np.ndarray,
              range_start_ns: np.ndarray, range_end_ns: np.ndarray, bounds_ns: np.ndarray
              ) -> np.ndarray:
    """The host time from the previous host event on the thread (the previous call's end,
    an annotation's start or end) to the own range's start, at most the range's own
    overhead (its duration less the call's); 0 without a previous event."""
    before = np.searchsorted(bounds_ns, range_start_ns, side="left") - 1
    prev_event_ns = np.maximum(prev_end_ns, np.where(before >= 0, bounds_ns[np.maximum(before, 0)],
                                                     prev_end_ns))
    known = prev_event_ns != I64_MIN  # no previous host event: no entry
    overhead_ns = ((range_end_ns - range_start_ns)
                   - (tl.api_end_ns[cut_calls] - tl.api_start_ns[cut_calls]))
    since_ns = range_start_ns - np.where(known, prev_event_ns, range_start_ns)
    entry: np.ndarray = np.where(
        known, np.minimum(np.maximum(since_ns, 0), np.maximum(overhead_ns, 0)), 0)
    return entry


def sync_copies(tl: Timeline, o_api: np.ndarray, is_top: np.ndarray) -> np.ndarray:
    """Per API call: a device-to-host copy call that returns only once its copy is done.

    A ``cudaMemcpyAsync`` into pageable memory (``.item()``, ``.cpu()``, ``.tolist()``) is
    synchronous: the host waits for everything queued before the copy. Kineto names the
    memory (``Memcpy DtoH (Device -> Pageable)``; ``Pinned`` is asynchronous); when the name
    does not say (Nsight: ``[CUDA memcpy DtoH]``), an API whose every such call returned
    after its copy ended is taken as synchronous.
    """
    out = np.zeros(tl.api_start_ns.size, dtype=bool)
    copy = tl.gpu_kind == KIND_MEMCPY
    if not copy.any():
        return out
    dtoh = np.array(["DtoH" in n for n in tl.names], dtype=bool)[tl.gpu_name]
    ops = np.nonzero(copy & dtoh & (o_api >= 0))[0]
    ops = ops[is_top[o_api[ops]]]
    if ops.size == 0:
        return out
    calls = o_api[ops]
    name = [tl.names[int(n)] for n in tl.gpu_name[ops]]
    pageable = np.array(["Pageable" in n for n in name], dtype=bool)
    unknown = np.array(["Pinned" not in n and "Pageable" not in n for n in name], dtype=bool)
    after = tl.api_end_ns[calls] >= tl.gpu_end_ns[ops]
    out[calls[pageable]] = True
    for _, sel in groups(tl.api_name[calls], np.nonzero(unknown)[0]):  # per API name
        if after[sel].all():
            out[calls[sel]] = True
    return out
