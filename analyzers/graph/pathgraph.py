"""The critical path's graph (``critical``): the what-if's graph of the run with nothing
dropped, two kinds of recorded waits added, and per node its binding edge and host run.

The client's memory is the limit at scale (docs/scale.md): the model and the graph are
dropped once the binding edges are known, what the walk needs is kept as compact arrays
(int32 node ids, int8 kinds; no Python list per event), and the binding edges are chosen
one block of nodes at a time. See ``critical`` for the rules.

No longest-path pass is run: the path is read at the recorded times (the recorded run is a
fixed point of the rules: ``critical``), where a node's binding edge is its in-edge that
comes first by the rules (``graph.longest_path.first_in_edges``) and a host run a chain
followed to its first node (``graph.longest_path.jump``): the what-if's solver's steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from types import MappingProxyType

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.timeline import Timeline, at_or, launch_calls
from profplug.analyzers.graph.events import (
    ANCHOR,
    CALL,
    HOST,
    LAUNCH,
    PEER,
    STREAM,
    STREAM_WAIT,
    SYNC,
    build_graph,
)
from profplug.analyzers.graph.longest_path import first_in_edges, jump
from profplug.analyzers.graph.matching import Matching
from profplug.analyzers.graph.model import DROP_NONE, DropSpec, Model, build_model, coupled

CATEGORIES = ("compute", "transfer", "peer_wait", "host_launch", "device_sync", "event_sync",
              "other")
COMPUTE, TRANSFER, PEER_WAIT, HOST_LAUNCH, DEV_SYNC, EVT_SYNC, OTHER = range(7)
CS, CE, OS, OE, SRC = range(5)  # node kinds: call start/end, op start/end, the source
# tie order of binding edges at one node (lower first)
_NEVER = -(2**62)  # an edge that does not bind (negatable without overflow)
_PRIORITY = MappingProxyType({STREAM: 0, STREAM_WAIT: 1, LAUNCH: 2, SYNC: 0, CALL: 1, PEER: 1, HOST: 0,
                              ANCHOR: 3})  # RUN: 0 (every kind not listed)
_BLOCK = 1 << 16  # edges per block of the binding choice
Edges = tuple[np.ndarray, np.ndarray, np.ndarray, int]  # src, dst, weight, kind


class NodeTimes:
    """Per node its recorded time (int64 ns) from the arrays it is made of, in node order
    (a rank's call starts, call ends, op starts, op ends, the source, the partners' starts),
    without joining them: a worker's critical-path part reads the times of a block of nodes
    at a time (docs/scale.md); :meth:`joined` makes the one array."""

    def __init__(self, parts: list[np.ndarray]) -> None:
        self.parts = parts
        self.bounds = np.cumsum([0] + [p.size for p in parts]).tolist()
        self.size = int(self.bounds[-1])

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx)
        out = np.empty(idx.shape, dtype=np.int64)
        which = np.searchsorted(np.asarray(self.bounds[1:]), idx, side="right")
        for k, p in enumerate(self.parts):
            sel = which == k
            if sel.any():
                out[sel] = p[idx[sel] - self.bounds[k]]
        return out

    def joined(self) -> np.ndarray:
        return np.concatenate(self.parts).astype(np.int64, copy=False)


def binding_edges(src: np.ndarray, dst: np.ndarray, w: np.ndarray, kind: np.ndarray,
                  n_a: int, n_o: int, rec: np.ndarray | NodeTimes, o_launch: np.ndarray,
                  tol: int,
                  sync_call: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node, the kind (int8) and source (``src``'s dtype) of the incoming edge that gives
    its time at the recorded times ``rec`` (see ``critical`` for the rules and ties); -1 for a
    node without one. ``o_launch``: per op, its recorded launch; ``sync_call``: per API call, a
    synchronize (a blocking copy's wait is host time on the path). Edges are taken one block
    of whole nodes at a time (by destination, each node's edges in their order), each node's
    first by the rules' keys (``graph.longest_path.first_in_edges``)."""
    n_nodes = rec.size
    b_kind = np.full(n_nodes, -1, dtype=np.int8)
    b_src = np.full(n_nodes, -1, dtype=src.dtype)
    prio_of = np.zeros(int(kind.max(initial=0)) + 1, dtype=np.int8)
    for k, p in _PRIORITY.items():
        if k < prio_of.size:
            prio_of[k] = p
    perm = np.argsort(dst, kind="stable").astype(src.dtype)
    ds = dst[perm]
    cuts = np.unique(np.searchsorted(ds, ds[::_BLOCK], side="left"))
    bounds = np.append(cuts, ds.size).tolist()
    del ds
    o_s0 = 2 * n_a
    for lo, hi in pairwise(bounds):
        e = perm[lo:hi]
        s, d, k = src[e], dst[e], kind[e]
        rs = rec[s]
        val = rs + w[e]
        if n_a:  # a rank without host calls (a partial export) has no sync edge either
            val[(k == SYNC) & ~sync_call[np.clip(d - n_a, 0, n_a - 1)]] = _NEVER
        val[k == PEER] -= tol  # a partner within tol does not bind
        # an op's start: what it waited for, by the times themselves (the model fits the
        # latency of an op that was not queued, so launch + latency always meets its start)
        into_op = (d >= o_s0) & (d < o_s0 + n_o)
        val[(k == ANCHOR) & into_op] = _NEVER + 1  # an unlinked op: last resort
        at_start = (k == LAUNCH) | (k == STREAM) | (k == STREAM_WAIT)
        raw = rs.copy()
        is_launch = k == LAUNCH
        raw[is_launch] = o_launch[d[is_launch] - o_s0]
        val[at_start] = raw[at_start]
        d0 = int(d[0])
        near = np.full(int(d[-1]) - d0 + 1, _NEVER, dtype=np.int64)  # max(prev end, launch)
        own = at_start & (k != STREAM_WAIT)
        np.maximum.at(near, d[own] - d0, raw[own])
        val[(k == STREAM_WAIT) & (near[d - d0] >= rec[d] - tol)] = _NEVER  # not waiting
        first = first_in_edges(d, (-rs, prio_of[k], -val))  # ties: the latest source
        b_kind[d[first]] = k[first]
        b_src[d[first]] = s[first]
    return b_kind, b_src


def inferred_waits(md: Model, tol: int) -> Edges | None:
    """A ``sync`` edge into each blocking call from the latest op of its rank that ended
    within the call (+-``tol``), as recorded: what the call was seen to wait for, also where
    the model has no record of it (the call then keeps its recorded duration in the replay)
    or counts only the ops launched before it that the trace shows."""
    n_a, n_o = md.a_start.size, md.o_start.size
    calls = np.nonzero(md.a_blocking)[0]
    if calls.size == 0 or md.o_end.size == 0:
        return None
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
        srcs.append(2 * n_a + n_o + o)
        dsts.append(n_a + c[ok])
        ws.append(md.a_end[c[ok]] - md.o_end[o])
    if not srcs:
        return None
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(ws), SYNC


def seen_stream_waits(md: Model, tol: int) -> Edges | None:
    """A ``stream_wait`` edge into each op that started more than ``tol`` after both its
    stream predecessor's end and its launch, from the latest other op of its rank that ended
    in between (up to ``tol`` after the start), as recorded: a wait the trace shows whether
    or not the model links it."""
    n_a, n_o = md.a_start.size, md.o_start.size
    if n_o == 0:
        return None
    o = np.arange(n_o)
    pe = np.where(md.o_prev >= 0, md.o_end[np.maximum(md.o_prev, 0)], np.iinfo(np.int64).min)
    ls = np.where(md.o_top >= 0, at_or(md.a_start, md.o_top, 0) + md.o_off,
                  np.iinfo(np.int64).min)  # at_or: a run without host calls has none
    near = np.maximum(pe, ls)
    del pe, ls
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
        return None
    s, d = np.concatenate(srcs), np.concatenate(dsts)
    return 2 * n_a + n_o + s, 2 * n_a + d, md.o_start[d] - md.o_end[s], STREAM_WAIT


def host_runs(b_kind: np.ndarray, b_src: np.ndarray, n_a: int, sync_call: np.ndarray
              ) -> np.ndarray:
    """Per node (``b_src``'s dtype), where its run of host time along its thread begins: following
    binding edges of kind ``host`` and ``call`` (of a call that is not a synchronize) back,
    as far as they go (``graph.longest_path.jump``); a node not bound that way is its own. The walk
    crosses such a run in one step: it is one host segment with one call site."""
    par = np.arange(b_kind.size, dtype=b_src.dtype)
    on = b_kind == HOST
    if n_a:  # a call's end bound by its own start, when it is not a synchronize
        on[n_a:2 * n_a] |= (b_kind[n_a:2 * n_a] == CALL) & ~sync_call
    par[on] = b_src[on]
    jump(par, np.flatnonzero(on & on[par]), lambda p: on[p])  # on to the run's first node
    return par


_NOT_IN_GRAPH = ("a_rank", "a_end", "a_gap_drop", "a_blocking", "a_dropped", "o_rank",
                 "o_local", "o_order")  # model arrays ``build_graph(m, drop=False)`` never reads


def _unneeded_by_graph(md: Model) -> None:
    """Let go of the model's arrays that the recorded graph does not read (~40 B per event
    at the critical path's peak: the graph is built while the model is alive)."""
    for name in _NOT_IN_GRAPH:
        setattr(md, name, np.zeros(0, dtype=getattr(md, name).dtype))
    md.threads, md.thread_key = [], []


def _alone(rank: int) -> Matching:
    """A matching without edges: one rank's model built on its own (its partners are set
    afterwards, from the run's matching)."""
    z = np.zeros(0, dtype=np.int64)
    return Matching([rank], z, z, z, z, z, z, np.zeros(1, dtype=np.int64), "", [])


@dataclass
class Partners:
    """One rank's matched NCCL kernels and the partner each is replayed against
    (``pairs.match_nccl``): local op, the partner's rank position and op, the partner's
    recorded start (its own clock) and aligned start, and the clock offset (partner's clock
    minus this rank's, ns)."""

    op: np.ndarray
    p_pos: np.ndarray
    p_op: np.ndarray
    p_start: np.ndarray
    p_aligned: np.ndarray
    clock: np.ndarray


def partners(m: Matching, start_of: Callable[[int, np.ndarray], np.ndarray]
             ) -> list[Partners]:
    """Every rank's :class:`Partners`, the choice ``pairs.match_nccl`` makes for the run's
    model: per matched kernel, the partner that started last on the aligned clock (ties:
    the later edge). ``start_of(pos, ops)``: the recorded starts of rank position ``pos``'s
    ops (a timeline's, or a comm view's: only matched kernels are asked for)."""
    off = np.asarray(m.offset_ns, dtype=np.int64)
    f_start = np.zeros(m.f_pos.size, dtype=np.int64)
    for p in np.unique(m.f_pos).tolist():
        sel = m.f_pos == p
        f_start[sel] = start_of(p, m.f_op[sel])
    aligned = f_start + off[m.f_pos]
    # by rank, then op, then partner start (ties: edge order): each op's last is its partner
    order = np.lexsort((aligned, m.e_op, m.e_pos))
    pos_o, op_o = m.e_pos[order], m.e_op[order]
    last = np.ones(order.size, dtype=bool)
    last[:-1] = (pos_o[1:] != pos_o[:-1]) | (op_o[1:] != op_o[:-1])
    take = order[last]
    cuts = np.searchsorted(m.e_pos[take], np.arange(len(m.ranks) + 1)).tolist()
    out = []
    for pos in range(len(m.ranks)):
        t = take[cuts[pos]:cuts[pos + 1]]
        out.append(Partners(m.e_op[t], m.f_pos[t], m.f_op[t], f_start[t], aligned[t],
                            off[m.e_pos[t]] - off[m.f_pos[t]]))
    return out


def run_partners(timelines: list[Timeline], m: Matching) -> list[Partners]:
    """:func:`partners` of the ranks' timelines."""
    return partners(m, lambda p, ops: timelines[p].gpu_start_ns[ops])


@dataclass
class RankGraph:
    """One rank's part of the run's graph, reduced to what the walk needs (``critical_walk``):
    per node its aligned time, binding edge (kind, source) and host run; per call and op
    what a segment takes from it. Local node ids as ``graph.events`` numbers one rank's
    (call starts, call ends, op starts, op ends, the source), then one node per matched
    kernel's partner start (``ghost_pos``/``ghost_op``: whose).

    A node's binding edge reads only its incoming edges and their sources' recorded times,
    and the only edges between ranks are the ``peer`` edges into a matched NCCL kernel's
    end, whose source (the partner's start) is one extra node at its recorded time: so a
    rank's graph, built alone, binds every node as the run's one graph does
    (``tests/unit/analyzers/crossrank/test_critical_path.py``), and the client holds one rank's model
    and graph at a time (docs/scale.md)."""

    pos: int
    n_a: int
    n_o: int
    t: np.ndarray  # per node, its aligned time (ns)
    bind_kind: np.ndarray
    bind_src: np.ndarray
    host_root: np.ndarray
    o_call: np.ndarray  # per op, its launching call (local row), -1 none
    run_cat: np.ndarray  # per op, its run's category
    o_launch: np.ndarray  # per op, its recorded launch (aligned)
    sync_call: np.ndarray  # per call, a synchronize
    a_dev: np.ndarray  # per call, a device-wide one
    ghost_pos: np.ndarray
    ghost_op: np.ndarray

    def node(self, v: int) -> tuple[int, int]:
        """Node ``v``'s kind (CS ... SRC; a partner's start: SRC) and index (call or op)."""
        n_a, n_o = self.n_a, self.n_o
        if v < 2 * n_a:
            return (CS, v) if v < n_a else (CE, v - n_a)
        if v < 2 * n_a + 2 * n_o:
            return (OS, v - 2 * n_a) if v < 2 * n_a + n_o else (OE, v - 2 * n_a - n_o)
        return SRC, -1

    def op_start(self, op: int) -> int:
        return 2 * self.n_a + op

    def op_end(self, op: int) -> int:
        return 2 * self.n_a + self.n_o + op


def rank_graph(tl: Timeline, pos: int, partners: Partners, comm_ops: np.ndarray,
               offset_ns: np.ndarray, tol: int, memo: Memo | None = None) -> RankGraph:
    """Rank position ``pos``'s :class:`RankGraph`: its model and graph on their own, the
    partners' starts as extra nodes, its binding edges and host runs (``memo``: the
    caller's, ``core.memo``)."""
    md = build_model([tl], DropSpec(kinds=DROP_NONE), matching=_alone(tl.rank), memo=memo)
    trim_large(md.n_events)  # the build's temporaries: the graph starts from what is live
    na, no = int(md.a_start.size), int(md.o_start.size)
    mine = partners.op
    paired = np.zeros(no, dtype=bool)
    paired[mine] = True
    p_start = np.zeros(no, dtype=np.int64)
    p_start[mine] = partners.p_start
    clock = np.zeros(no, dtype=np.int64)
    clock[mine] = partners.clock
    ck, xfer, _ = coupled(md.o_start, md.o_end, p_start, paired, clock)
    o_peer = np.full(no, -1, dtype=np.int64)
    o_peer[mine] = 2 * no + 1 + np.arange(mine.size)  # node 2 * na + that: the partner's start
    md.o_peer, md.o_xfer, md.o_clock = o_peer, xfer, ck
    extra = [x for x in (inferred_waits(md, tol), seen_stream_waits(md, tol)) if x]
    rec = NodeTimes([md.a_start, md.a_end, md.o_start, md.o_end,
                     np.zeros(1, dtype=np.int64), np.asarray(partners.p_start, dtype=np.int64)])
    o_launch = at_or(md.a_start, md.o_top, 0) + np.where(md.o_top >= 0, md.o_off, 0)
    a_kind = classify.kinds_for_symbols(tl.names, memo)[tl.api_name] if tl.api_name.size \
        else np.zeros(0, dtype=np.int8)
    sync_call = (a_kind == classify.DEVICE) | (a_kind == classify.EVENT)
    _unneeded_by_graph(md)
    trim_large(md.n_events)
    # the binding edges of one kind of node at a time (call starts, call ends, op starts,
    # op ends): each node's incoming edges are all in its part, and only one part's edges
    # exist at once (a worker's memory: docs/scale.md)
    ix = np.int32 if rec.size < 2**31 else np.int64  # node ids
    b_kind = np.full(rec.size, -1, dtype=np.int8)
    b_src = np.full(rec.size, -1, dtype=ix)
    for lo, hi in pairwise((0, na, 2 * na, 2 * na + no, 2 * na + 2 * no)):
        if hi == lo:
            continue
        g = build_graph(md, drop=False, into=(lo, hi))
        ex = [(x[0][keep], x[1][keep], x[2][keep], x[3])
              for x in extra for keep in [(x[1] >= lo) & (x[1] < hi)] if keep.any()]
        src = np.concatenate([g.src, *(x[0] for x in ex)], dtype=ix, casting="same_kind")
        dst = np.concatenate([g.dst, *(x[1] for x in ex)], dtype=ix, casting="same_kind")
        w = np.concatenate([g.w, *(x[2] for x in ex)])
        kind = np.concatenate([g.kind, *(np.full(x[1].size, x[3], dtype=np.int8) for x in ex)])
        del g, ex
        bk, bs = binding_edges(src, dst, w, kind, na, no, rec, o_launch, tol, sync_call)
        del src, dst, w, kind
        b_kind[lo:hi], b_src[lo:hi] = bk[lo:hi], bs[lo:hi]
        del bk, bs
    del md, extra
    off = int(offset_ns[pos])
    t = rec.joined()
    t += off
    t[2 * na + 2 * no + 1:] = partners.p_aligned  # the partners' starts, on their clocks
    run_cat = np.full(no, COMPUTE, dtype=np.int8)
    comm = np.asarray(comm_ops, dtype=np.int64)
    run_cat[comm] = np.where(paired[comm], TRANSFER, OTHER)
    return RankGraph(pos, na, no, t, b_kind, b_src, host_runs(b_kind, b_src, na, sync_call),
                     launch_calls(tl, memo), run_cat, o_launch + off, sync_call,
                     a_kind == classify.DEVICE, partners.p_pos, partners.p_op)
