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
from dataclasses import dataclass, field, replace

import numpy as np

from .. import classify
from ..callsites import enclosing
from ..steps import StepSpans
from ..timeline import Timeline, at_or, launch_calls
from ..whatif.graph import (
    ANCHOR,
    CALL,
    HOST,
    LAUNCH,
    PEER,
    RUN,
    STREAM,
    STREAM_WAIT,
    SYNC,
    Graph,
    build_graph,
)
from ..whatif.model import DROP_NONE, DropSpec, Model, build_model
from .matching import Matching

CATEGORIES = ("compute", "transfer", "peer_wait", "host_launch", "device_sync", "event_sync",
              "other")
COMPUTE, TRANSFER, PEER_WAIT, HOST_LAUNCH, DEV_SYNC, EVT_SYNC, OTHER = range(7)
# tie order of binding edges at one node (lower first)
_NEVER = -(2**62)  # an edge that does not bind (negatable without overflow)
_PRIORITY = {STREAM: 0, STREAM_WAIT: 1, LAUNCH: 2, SYNC: 0, CALL: 1, RUN: 0, PEER: 1,
             HOST: 0, ANCHOR: 3}


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


def binding_edges(g: Graph, md: Model, rec: np.ndarray, tol: int, sync_call: np.ndarray
                  ) -> np.ndarray:
    """Per node, the incoming edge that gives its time at the recorded times ``rec`` (see
    the module docstring for the rules and ties); -1 for a node without one. ``sync_call``:
    per API call, a synchronize (a blocking copy's wait is host time on the path)."""
    val = rec[g.src] + g.w
    copy_wait = np.zeros(g.kind.size, dtype=bool)
    if g.n_a:  # a rank without host calls (a partial export) has no sync edge either
        copy_wait = (g.kind == SYNC) & ~sync_call[np.clip(g.dst - g.n_a, 0, g.n_a - 1)]
    val = np.where(copy_wait, _NEVER, val)
    val = np.where(g.kind == PEER, val - tol, val)  # a partner within tol does not bind
    # an op's start: what it waited for, by the times themselves (the model fits the
    # latency of an op that was not queued, so launch + latency always meets its start)
    o_s0 = 2 * g.n_a
    none = _NEVER
    into_op = (g.dst >= o_s0) & (g.dst < o_s0 + g.n_o)
    val = np.where((g.kind == ANCHOR) & into_op, none + 1, val)  # an unlinked op: last resort
    at_start = (g.kind == LAUNCH) | (g.kind == STREAM) | (g.kind == STREAM_WAIT)
    op = np.clip(g.dst - o_s0, 0, max(g.n_o - 1, 0))
    o_off = md.o_off[op] if g.n_o else np.zeros(g.dst.size, dtype=np.int64)
    raw = np.where(g.kind == LAUNCH, rec[g.src] + o_off, rec[g.src])
    val = np.where(at_start, raw, val)
    near = np.full(g.n_nodes, none, dtype=np.int64)  # max(prev end, launch)
    own = at_start & (g.kind != STREAM_WAIT)
    np.maximum.at(near, g.dst[own], raw[own])
    late = (g.kind == STREAM_WAIT) & (near[g.dst] >= rec[g.dst] - tol)
    val = np.where(late, none, val)  # the op was not waiting on a stream
    prio = np.array([_PRIORITY[k] for k in range(int(g.kind.max(initial=0)) + 1)])[g.kind]
    order = np.lexsort((-rec[g.src], prio, -val, g.dst))  # ties: the latest source
    first = np.append(True, g.dst[order][1:] != g.dst[order][:-1]) if order.size else order
    out = np.full(g.n_nodes, -1, dtype=np.int64)
    out[g.dst[order[first]]] = order[first]
    return out


def _with_inferred_waits(g: Graph, md: Model, tol: int) -> Graph:
    """``g`` plus a ``sync`` edge into each blocking call from the latest op of its rank
    that ended within the call (+-``tol``), as recorded: what the call was seen to wait for,
    also where the model has no record of it (the call then keeps its recorded duration in
    the replay) or counts only the ops launched before it that the trace shows."""
    calls = np.nonzero(md.a_blocking)[0]
    if calls.size == 0 or md.o_end.size == 0:
        return g
    srcs, dsts, ws = [], [], []
    for r, (lo, hi) in md.rank_o.items():
        c = calls[md.a_rank[calls] == r]
        if c.size == 0 or hi == lo:
            continue
        order = lo + np.argsort(md.o_end[lo:hi], kind="stable")
        ends = md.o_end[order]
        k = np.searchsorted(ends, md.a_end[c] + tol, side="right") - 1
        ok = (k >= 0) & (ends[np.maximum(k, 0)] > md.a_start[c] - tol)
        o = order[np.maximum(k, 0)][ok]
        srcs.append(2 * g.n_a + g.n_o + o)
        dsts.append(g.n_a + c[ok])
        ws.append(md.a_end[c[ok]] - md.o_end[o])
    if not srcs:
        return g
    n = int(sum(x.size for x in srcs))
    return replace(g, src=np.concatenate([g.src, *srcs]), dst=np.concatenate([g.dst, *dsts]),
                   w=np.concatenate([g.w, *ws]),
                   kind=np.concatenate([g.kind, np.full(n, SYNC, dtype=np.int8)]))


def _with_seen_stream_waits(g: Graph, md: Model, tol: int) -> Graph:
    """``g`` plus a ``stream_wait`` edge into each op that started more than ``tol`` after
    both its stream predecessor's end and its launch, from the latest other op of its rank
    that ended in between (up to ``tol`` after the start), as recorded: a wait the trace
    shows whether or not the model links it."""
    n_o = md.o_start.size
    if n_o == 0:
        return g
    o = np.arange(n_o)
    pe = np.where(md.o_prev >= 0, md.o_end[np.maximum(md.o_prev, 0)], np.iinfo(np.int64).min)
    ls = np.where(md.o_top >= 0, at_or(md.a_start, md.o_top, 0) + md.o_off,
                  np.iinfo(np.int64).min)  # at_or: a run without host calls has none
    near = np.maximum(pe, ls)
    cand = near < md.o_start - tol
    srcs, dsts = [], []
    for lo, hi in md.rank_o.values():
        sel = o[lo:hi][cand[lo:hi]]
        if sel.size == 0:
            continue
        order = lo + np.argsort(md.o_end[lo:hi], kind="stable")
        ends = md.o_end[order]
        k = np.searchsorted(ends, md.o_start[sel] + tol, side="right") - 1
        k = np.where((k >= 0) & (order[np.maximum(k, 0)] == sel), k - 1, k)  # not itself
        ok = (k >= 0) & (ends[np.maximum(k, 0)] > near[sel])
        srcs.append(order[np.maximum(k, 0)][ok])
        dsts.append(sel[ok])
    if not srcs:
        return g
    s, d = np.concatenate(srcs), np.concatenate(dsts)
    return replace(g, src=np.concatenate([g.src, 2 * g.n_a + g.n_o + s]),
                   dst=np.concatenate([g.dst, 2 * g.n_a + d]),
                   w=np.concatenate([g.w, md.o_start[d] - md.o_end[s]]),
                   kind=np.concatenate([g.kind, np.full(s.size, STREAM_WAIT, dtype=np.int8)]))


def _host_runs(g: Graph, bind: np.ndarray, sync_call: np.ndarray) -> np.ndarray:
    """Per node, where its run of host time along its thread begins: following binding edges
    of kind ``host`` and ``call`` (of a call that is not a synchronize) back, as far as they
    go (pointer jumping); a node not bound that way is its own. The walk crosses such a run
    in one step: it is one host segment with one call site."""
    n = g.n_nodes
    par = np.arange(n)
    b = np.nonzero(bind >= 0)[0]
    e = bind[b]
    k = g.kind[e]
    is_sync = (sync_call[np.clip(b - g.n_a, 0, g.n_a - 1)] if g.n_a  # no host calls: none
               else np.zeros(b.size, dtype=bool))
    jump = (k == HOST) | ((k == CALL) & ~is_sync & (b >= g.n_a) & (b < 2 * g.n_a))
    par[b[jump]] = g.src[e[jump]]
    for _ in range(64):
        nxt = par[par]
        if (nxt == par).all():
            break
        par = nxt
    return par


CS, CE, OS, OE, SRC = range(5)  # node kinds: call start/end, op start/end, the source


class _PathGraph:
    """The run's graph with its binding edges, and per node (Python lists, for the walk):
    kind, index, rank position, aligned time, binding edge's kind and source, host run."""

    def __init__(self, timelines: list[Timeline], m: Matching, tol: int) -> None:
        self.model: Model = build_model(timelines, DropSpec(kinds=DROP_NONE), matching=m)
        md = self.model
        rec = np.concatenate([md.a_start, md.a_end, md.o_start, md.o_end, [0]])
        rec = rec.astype(np.int64)
        g = _with_seen_stream_waits(
            _with_inferred_waits(build_graph(md, drop=False), md, tol), md, tol)
        self.g = g
        n_a, n_o = g.n_a, g.n_o
        kinds = [classify.kinds_for_symbols(tl.names)[tl.api_name] if tl.api_name.size
                 else np.zeros(0, dtype=np.int8) for tl in timelines]
        a_kind = np.concatenate(kinds) if kinds else np.zeros(0, dtype=np.int8)
        sync_call = (a_kind == classify.DEVICE) | (a_kind == classify.EVENT)
        bind = binding_edges(g, md, rec, tol, sync_call)
        pos_of = {tl.rank: i for i, tl in enumerate(timelines)}
        a_pos = np.array([pos_of[int(r)] for r in md.a_rank], dtype=np.int64)
        o_pos = np.array([pos_of[int(r)] for r in md.o_rank], dtype=np.int64)
        off = np.asarray(m.offset_ns, dtype=np.int64)
        pos = np.concatenate([a_pos, a_pos, o_pos, o_pos, [0]]).astype(np.int64)
        t_al = rec + off[pos] if off.size else rec
        self.t = t_al.tolist()
        self.pos = pos.tolist()
        self.nkind = np.concatenate([np.full(n_a, CS), np.full(n_a, CE), np.full(n_o, OS),
                                     np.full(n_o, OE), [SRC]]).tolist()
        self.nidx = np.concatenate([np.arange(n_a), np.arange(n_a), np.arange(n_o),
                                    np.arange(n_o), [-1]]).tolist()
        has = np.nonzero(bind >= 0)[0]
        b_kind = np.full(bind.size, -1, dtype=np.int64)
        b_src = np.full(bind.size, -1, dtype=np.int64)
        b_kind[has], b_src[has] = g.kind[bind[has]], g.src[bind[has]]
        self.bind_kind, self.bind_src = b_kind.tolist(), b_src.tolist()
        self.host_root = _host_runs(g, bind, sync_call).tolist()
        a_local = np.concatenate([np.arange(tl.api_start_ns.size) for tl in timelines]) \
            if timelines else np.zeros(0, dtype=np.int64)
        self.a_local = a_local.tolist()
        self.a_dev = (a_kind == classify.DEVICE).tolist()
        self.sync_call = sync_call.tolist()
        comm = np.zeros(n_o, dtype=bool)
        for i, ops in enumerate(m.comm_ops):
            lo, _ = md.rank_o[timelines[i].rank]
            comm[lo + np.asarray(ops, dtype=np.int64)] = True
        o_call = np.full(n_o, -1, dtype=np.int64)  # launching call (local row)
        for tl in timelines:
            lo, hi = md.rank_o[tl.rank]
            o_call[lo:hi] = launch_calls(tl)
        self.o_call = o_call.tolist()
        self.run_cat = np.where(comm, np.where(md.o_peer >= 0, TRANSFER, OTHER),
                                COMPUTE).tolist()
        launch = at_or(md.a_start, md.o_top, 0) + np.where(md.o_top >= 0, md.o_off, 0)
        self.launch = (launch + (off[o_pos] if off.size else 0)).tolist()


def walk(pg: _PathGraph, op: int, lo: int) -> list[Segment]:
    """The critical path from the end of (model) op ``op`` back to aligned time ``lo``."""
    g = pg.g
    T, POS, NK, NI = pg.t, pg.pos, pg.nkind, pg.nidx
    BK, BS, ROOT = pg.bind_kind, pg.bind_src, pg.host_root
    segs: list[Segment] = []
    v = g.n_a * 2 + g.n_o + op
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
        k = BK[v]
        if k < 0:
            break
        kind, i, pos, t = NK[v], NI[v], POS[v], T[v]
        root = ROOT[v]
        if root != v:  # a run of host time on the thread: one segment
            if not emit(HOST_LAUNCH, pos, T[root], t, carried):
                break
            v = root
            continue
        u = BS[v]
        if kind == OE:
            call = pg.o_call[i]
            if k == PEER:
                ok = emit(TRANSFER, pos, T[u], t, call)
            else:
                ok = emit(pg.run_cat[i], pos, T[u], t, call)
        elif kind == OS:
            call = pg.o_call[i]
            if k == STREAM or k == STREAM_WAIT:
                ok = emit(OTHER, pos, min(T[u], t), t, call)
            elif k == LAUNCH:
                ok = emit(HOST_LAUNCH, pos, min(pg.launch[i], t), t, call)
                carried = call
            else:  # an unlinked op
                emit(OTHER, pos, lo, t, -1)
                break
        elif kind == CE:
            local = pg.a_local[i]
            if k == SYNC:
                cat = DEV_SYNC if pg.a_dev[i] else EVT_SYNC
                ok = emit(cat, pos, min(T[u], t), t, local)
                carried = -1
            else:
                blocking = pg.sync_call[i]
                ok = emit(HOST_LAUNCH, pos, T[u], t, local if blocking else carried)
                if blocking:
                    carried = local
        elif kind == CS:
            if k == HOST:
                ok = emit(HOST_LAUNCH, pos, min(T[u], t), t, carried)
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
    pg = _PathGraph(timelines, m, tol)
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
    base = [pg.model.rank_o[tl.rank][0] for tl in timelines]
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
