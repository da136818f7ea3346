"""The critical path of each step, across ranks: the chain of binding edges on the what-if's
dependency graph (``whatif.graph``) that set the step's end.

The graph is the run's model with nothing dropped (``whatif.model``, ``DROP_NONE``): host
calls, GPU ops and matched NCCL kernels, every rule "the latest of several predecessor times
plus a fixed delay". At the recorded times (the recorded run is a fixed point of the rules),
each node's *binding* edge is the incoming edge that gives its time: the latest
``source time + weight`` (ties: the stream predecessor before a stream wait before the launch;
a matched kernel's own start before its partner's unless the partner started more than
``tol`` later; a sync's awaited op before its own cost). The path of step k starts at the end
of the latest op launched in step k on any rank, ``E_k``, and follows binding edges back to
``T_k`` (the earliest first op of step k on any rank, ``steps.step_spans``), each edge giving
one segment on the aligned clock (``matching``) by its kind:

| edge kind | segment | category |
| --- | --- | --- |
| ``run`` (op start -> end) | [start, end] | ``compute``; a NCCL kernel: ``transfer`` (matched), ``other`` (unmatched: its wait cannot be told from its transfer) |
| ``peer`` (partner's start -> NCCL end) | [partner's start, end], then on the partner's rank | ``transfer`` (its own wait before is slack) |
| ``stream``, ``stream_wait`` (an op's end -> the next op's start) | [that end, start] | ``other`` |
| ``launch`` (host call -> op start) | [the call's start, start] | ``host_launch`` |
| ``host``, ``call`` (host time between calls; a call that did not wait) | the host interval | ``host_launch`` |
| ``sync`` (awaited op's end -> blocking call's end) | [op end, call end] | ``device_sync`` (cudaDeviceSynchronize & co.), ``event_sync`` (stream/event synchronize, blocking copies) |
| ``anchor`` (the trace's first host call, an unlinked op) | back to T_k | ``host_launch`` / ``other`` |

The walk stops at T_k (the last segment clipped). ``peer wait`` is 0 on the path by this
definition: a matched kernel's wait is slack; the category is listed so that the split
matches the bubble's. Shares are time on the path / the path's length (they sum to 1). A
segment's call site is its host call's: the launching call of the op that led onto the host
for host time (kept along the thread until a sync), the sync call for sync time
(``callsites.enclosing``, innermost annotation). Consecutive segments of one rank, category
and call are merged. Without common steps, the whole run is one window (``basis``
"window").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..callsites import enclosing
from ..steps import StepSpans
from ..timeline import Timeline
from ..whatif.graph import HOST, LAUNCH, PEER, STREAM, STREAM_WAIT, SYNC
from .matching import Matching
from .pathgraph import (
    CATEGORIES,
    CE,
    COMPUTE,
    CS,
    DEV_SYNC,
    EVT_SYNC,
    HOST_LAUNCH,
    OE,
    OS,
    OTHER,
    PEER_WAIT,
    TRANSFER,
    PathGraph,
)

__all__ = ["CATEGORIES", "COMPUTE", "DEV_SYNC", "EVT_SYNC", "HOST_LAUNCH", "OTHER", "PEER_WAIT",
           "TRANSFER", "Segment", "StepPath", "call_sites", "critical_paths", "walk"]


@dataclass
class Segment:
    pos: int
    cat: int
    start: int
    end: int
    call: int  # API row on that rank, -1 none


@dataclass
class StepPath:
    step: int | None  # step number (None: the whole window)
    lo_ns: int
    hi_ns: int
    segments: list[Segment] = field(default_factory=list)


def walk(pg: PathGraph, op: int, lo: int) -> list[Segment]:
    """The critical path from the end of (model) op ``op`` back to aligned time ``lo``."""
    BK, BS, ROOT = pg.bind_kind, pg.bind_src, pg.host_root
    segs: list[Segment] = []
    v = pg.n_a * 2 + pg.n_o + op
    carried = -1  # the launching call of the op that led onto the host
    seen: set[int] = set()

    def emit(cat: int, pos: int, a: int, b: int, c: int) -> bool:
        if b <= lo:
            return False
        if b > a:
            last = segs[-1] if segs else None
            if last is not None and last.start == b and last.pos == pos and last.cat == cat \
                    and last.call == c:
                last.start = max(a, lo)
            else:
                segs.append(Segment(pos, cat, max(a, lo), b, c))
        return a > lo

    while v not in seen:
        seen.add(v)
        k = int(BK[v])
        if k < 0:
            break
        kind, i, pos = pg.node(v)
        t = pg.t(v)
        root = int(ROOT[v])
        if root != v:  # a run of host time on the thread: one segment
            if not emit(HOST_LAUNCH, pos, pg.t(root), t, carried):
                break
            v = root
            continue
        u = int(BS[v])
        if kind == OE:
            call = int(pg.o_call[i])
            if k == PEER:
                ok = emit(TRANSFER, pos, pg.t(u), t, call)
            else:
                ok = emit(int(pg.run_cat[i]), pos, pg.t(u), t, call)
        elif kind == OS:
            call = int(pg.o_call[i])
            if k == STREAM or k == STREAM_WAIT:
                ok = emit(OTHER, pos, min(pg.t(u), t), t, call)
            elif k == LAUNCH:
                launch = int(pg.o_launch[i]) + (pg.off[pos] if pg.off else 0)
                ok = emit(HOST_LAUNCH, pos, min(launch, t), t, call)
                carried = call
            else:  # an unlinked op
                emit(OTHER, pos, lo, t, -1)
                break
        elif kind == CE:
            local = i - pg.a_lo[pos]
            if k == SYNC:
                cat = DEV_SYNC if pg.a_dev[i] else EVT_SYNC
                ok = emit(cat, pos, min(pg.t(u), t), t, local)
                carried = -1
            else:
                blocking = bool(pg.sync_call[i])
                ok = emit(HOST_LAUNCH, pos, pg.t(u), t, local if blocking else carried)
                if blocking:
                    carried = local
        elif kind == CS:
            if k == HOST:
                ok = emit(HOST_LAUNCH, pos, min(pg.t(u), t), t, carried)
            else:  # the first call of its thread
                emit(HOST_LAUNCH, pos, lo, t, carried)
                break
        else:
            break
        if not ok:
            break
        v = u
    return segs


def critical_paths(timelines: list[Timeline], m: Matching, spans: list[StepSpans], tol: int
                   ) -> tuple[list[StepPath], str]:
    """The path of every step common to the ranks (or of the whole run); and the basis."""
    pg = PathGraph(timelines, m, tol)
    windows: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for i, (tl, sp) in enumerate(zip(timelines, spans, strict=True)):
        if sp.rows.size == 0:
            continue
        nums = tl.step_num[sp.rows]
        e_al = tl.gpu_end_ns + m.offset_ns[i]
        for k, num in enumerate(nums.tolist()):
            ops = np.nonzero(sp.op_step == k)[0]
            if ops.size:
                j = int(ops[np.argmax(e_al[ops])])
                windows[num].append((int(sp.span_s[k] + m.offset_ns[i]), int(e_al[j]), i, j))
    with_steps = sum(1 for sp in spans if sp.rows.size)
    base = pg.o_lo
    paths: list[StepPath] = []
    for num in sorted(windows):
        w = windows[num]
        if len(w) < with_steps:
            continue  # not a complete step on every rank that has steps
        lo = min(x[0] for x in w)
        hi, _, i, j = max((x[1], -x[2], x[2], x[3]) for x in w)
        paths.append(StepPath(num, lo, hi, walk(pg, base[i] + j, lo)))
    if paths:
        return paths, "step"
    ends = [(int(tl.gpu_end_ns[o] + m.offset_ns[i]), i, o) for i, tl in enumerate(timelines)
            for o in range(tl.n_gpu)]
    if not ends:
        return [], "window"
    hi, i, j = max(ends)
    lo = min(int(tl.gpu_start_ns.min() + m.offset_ns[k]) for k, tl in enumerate(timelines)
             if tl.n_gpu)
    return [StepPath(None, lo, hi, walk(pg, base[i] + j, lo))], "window"


def call_sites(timelines: list[Timeline], paths: list[StepPath]) -> dict[tuple[int, int], str]:
    """(rank position, API row) -> call site, for every call on the paths."""
    want: dict[int, set[int]] = defaultdict(set)
    for sp in paths:
        for s in sp.segments:
            if s.call >= 0:
                want[s.pos].add(s.call)
    out: dict[tuple[int, int], str] = {}
    for p, calls in want.items():
        tl = timelines[p]
        c = np.array(sorted(calls), dtype=np.int64)
        labels = enclosing(tl, tl.api_start_ns[c], tl.api_end_ns[c], tl.api_tid[c])
        out.update({(p, int(x)): lab for x, lab in zip(c.tolist(), labels, strict=True)})
    return out
