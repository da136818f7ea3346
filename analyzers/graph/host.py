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
    n = tl.api_start_ns.size
    pre = np.zeros(n, dtype=np.int64)
    post = np.zeros(n, dtype=np.int64)
    if not dropped.any() or tl.ann_start_ns.size == 0:
        return pre, post
    s, e = tl.api_start_ns, tl.api_end_ns
    is_step = np.array([n == STEP or n.startswith("ProfilerStep#") for n in tl.names],
                       dtype=bool)
    step_range = is_step[tl.ann_name]  # a step is never a call's own range
    for seq in threads:
        pos = np.nonzero(dropped[seq])[0]
        if pos.size == 0:
            continue
        on_thread = tl.ann_tid == tl.api_tid[seq[0]]
        sel = np.nonzero(on_thread & ~step_range)[0]
        if sel.size == 0:
            continue
        order = sel[np.argsort(tl.ann_start_ns[sel], kind="stable")]
        a_s, a_e = tl.ann_start_ns[order], tl.ann_end_ns[order]
        bounds = np.sort(np.concatenate([tl.ann_start_ns[on_thread], tl.ann_end_ns[on_thread]]))
        _cut_thread(seq, pos, s, e, a_s, a_e, bounds, pre, post)
    return pre, post


def _cut_thread(seq: np.ndarray, pos: np.ndarray, s: np.ndarray, e: np.ndarray,
                a_s: np.ndarray, a_e: np.ndarray, bounds: np.ndarray, pre: np.ndarray,
                post: np.ndarray) -> None:
    """``pre``/``post`` of the dropped calls ``seq[pos]`` of one thread (see
    :func:`drop_cuts`), all at once: every (call, annotation) candidate pair is listed, the
    rules filter them, and each call keeps its outermost range."""
    none, top = I64_MIN, I64_MAX
    i = seq[pos]
    lo = np.where(pos > 0, e[seq[np.maximum(pos - 1, 0)]], none)
    hi = np.where(pos + 1 < seq.size, s[seq[np.minimum(pos + 1, seq.size - 1)]], top)
    k0 = np.searchsorted(a_s, lo, side="left")
    cnt = np.maximum(np.searchsorted(a_s, s[i], side="right") - k0, 0)
    if not cnt.any():
        return
    owner = np.repeat(np.arange(i.size), cnt)  # the annotations starting in [lo, start]
    k = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(k0, cnt)
    own_dur = (e[i] - s[i])[owner]
    ok = (e[i][owner] <= a_e[k]) & (a_e[k] <= hi[owner]) \
        & ((a_e[k] - a_s[k]) - own_dur <= OWN_RANGE_MAX_NS)
    owner, k = owner[ok], k[ok]
    if owner.size == 0:
        return
    order = np.lexsort((-a_e[k], a_s[k], owner))  # per call: the outermost first
    owner, k = owner[order], k[order]
    first = np.concatenate(([True], owner[1:] != owner[:-1]))
    owner, k = owner[first], k[first]
    c = i[owner]
    r_s, r_e = a_s[k], a_e[k]
    b = np.searchsorted(bounds, r_s, side="left") - 1
    lo_c = lo[owner]
    prev = np.maximum(lo_c, np.where(b >= 0, bounds[np.maximum(b, 0)], lo_c))
    known = prev != none  # no previous host event: no entry
    overhead = (r_e - r_s) - (e[c] - s[c])
    entry = np.where(known, np.minimum(np.maximum(r_s - np.where(known, prev, r_s), 0),
                                       np.maximum(overhead, 0)), 0)
    pre[c] = s[c] - r_s + entry
    post[c] = r_e - e[c]


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
