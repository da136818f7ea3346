"""The critical path's graph (``critical``): the what-if's graph of the run with nothing
dropped, two kinds of recorded waits added, and per node its binding edge and host run.

The client's memory is the limit at scale (docs/scale.md): the model and the graph are
dropped once the binding edges are known, what the walk needs is kept as compact arrays
(int32 node ids, int8 kinds; no Python list per event), and the binding edges are chosen
one block of nodes at a time. See ``critical`` for the rules.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise

import numpy as np

from .. import classify
from ..memtrim import trim_large
from ..timeline import Timeline, at_or, launch_calls
from ..whatif.graph import ANCHOR, CALL, HOST, LAUNCH, PEER, STREAM, STREAM_WAIT, SYNC, build_graph
from ..whatif.model import DROP_NONE, DropSpec, Model, build_model, coupled
from ..whatif.pairs import match_nccl
from .matching import Matching

CATEGORIES = ("compute", "transfer", "peer_wait", "host_launch", "device_sync", "event_sync",
              "other")
COMPUTE, TRANSFER, PEER_WAIT, HOST_LAUNCH, DEV_SYNC, EVT_SYNC, OTHER = range(7)
CS, CE, OS, OE, SRC = range(5)  # node kinds: call start/end, op start/end, the source
# tie order of binding edges at one node (lower first)
_NEVER = -(2**62)  # an edge that does not bind (negatable without overflow)
_PRIORITY = {STREAM: 0, STREAM_WAIT: 1, LAUNCH: 2, SYNC: 0, CALL: 1, PEER: 1, HOST: 0,
             ANCHOR: 3}  # RUN: 0 (every kind not listed)
_BLOCK = 1 << 16  # edges per block of the binding choice
Edges = tuple[np.ndarray, np.ndarray, np.ndarray, int]  # src, dst, weight, kind


def binding_edges(src: np.ndarray, dst: np.ndarray, w: np.ndarray, kind: np.ndarray,
                  n_a: int, n_o: int, rec: np.ndarray, o_launch: np.ndarray, tol: int,
                  sync_call: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node, the kind (int8) and source (``src``'s dtype) of the incoming edge that gives
    its time at the recorded times ``rec`` (see ``critical`` for the rules and ties); -1 for a
    node without one. ``o_launch``: per op, its recorded launch; ``sync_call``: per API call, a
    synchronize (a blocking copy's wait is host time on the path). Edges are taken one block
    of whole nodes at a time (by destination, each node's edges in their order)."""
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
        order = np.lexsort((-rs, prio_of[k], -val, d))  # ties: the latest source
        d_o = d[order]
        first = order[np.append(True, d_o[1:] != d_o[:-1])]
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
    as far as they go (pointer jumping); a node not bound that way is its own. The walk
    crosses such a run in one step: it is one host segment with one call site."""
    par = np.arange(b_kind.size, dtype=b_src.dtype)
    jump = b_kind == HOST
    if n_a:  # a call's end bound by its own start, when it is not a synchronize
        jump[n_a:2 * n_a] |= (b_kind[n_a:2 * n_a] == CALL) & ~sync_call
    par[jump] = b_src[jump]
    del jump
    for _ in range(64):
        nxt = par[par]
        if (nxt == par).all():
            break
        par = nxt
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


class PathGraph:
    """The run's graph reduced to what the walk needs (see ``critical.walk``): per node its
    recorded time, binding edge (kind, source) and host run; per call and op what a segment
    takes from it. Node ids are the graph's (``whatif.graph``); ``t(v)`` is a node's aligned
    time.

    Built one rank at a time: a node's binding edge reads only its incoming edges and their
    sources' recorded times, and the only edges between ranks are the ``peer`` edges into a
    matched NCCL kernel's end, whose source (the partner's start) enters a rank's graph as
    one extra node at its recorded time. So the client holds one rank's model and graph at
    a time, not the run's (docs/scale.md), and every node gets the edge the run's graph
    gives it (``tests/unit/analyzers/test_critical_path.py``)."""

    def __init__(self, timelines: list[Timeline], m: Matching, tol: int) -> None:
        a_lo = np.cumsum([0] + [tl.api_start_ns.size for tl in timelines]).tolist()
        o_lo = np.cumsum([0] + [tl.n_gpu for tl in timelines]).tolist()
        n_a, n_o = a_lo[-1], o_lo[-1]
        self.n_a, self.n_o = n_a, n_o
        self.rank_o = {tl.rank: (o_lo[k], o_lo[k + 1]) for k, tl in enumerate(timelines)}
        self.a_lo, self.o_lo = a_lo[:-1], o_lo[:-1]  # rank position -> its first call, op
        # every op's partner (run index, -1 none) and clock, as the run's model has them
        peer, clock = match_nccl(timelines, o_lo, n_o, [], [], m)
        n_nodes = 2 * n_a + 2 * n_o + 1
        ix = np.int32 if n_nodes < 2**31 else np.int64  # node ids
        self.rec = np.zeros(n_nodes, dtype=np.int64)
        self.bind_kind = np.full(n_nodes, -1, dtype=np.int8)
        self.bind_src = np.full(n_nodes, -1, dtype=ix)
        self.host_root = np.arange(n_nodes, dtype=ix)
        self.o_launch = np.zeros(n_o, dtype=np.int64)
        self.sync_call = np.zeros(n_a, dtype=bool)
        self.a_dev = np.zeros(n_a, dtype=bool)
        self.o_call = np.full(n_o, -1, dtype=np.int32)  # launching call (local row)
        for k, tl in enumerate(timelines):
            self._add_rank(k, tl, peer, clock, tol, timelines)
        self.off = np.asarray(m.offset_ns, dtype=np.int64).tolist()
        run_cat = np.full(n_o, COMPUTE, dtype=np.int8)
        for i, ops in enumerate(m.comm_ops):
            comm = self.o_lo[i] + np.asarray(ops, dtype=np.int64)
            run_cat[comm] = np.where(peer[comm] >= 0, TRANSFER, OTHER)
        self.run_cat = run_cat
        trim_large(n_a + n_o)  # what the ranks' models and graphs freed

    def _add_rank(self, k: int, tl: Timeline, peer: np.ndarray, clock: np.ndarray, tol: int,
                  timelines: list[Timeline]) -> None:
        """Rank position ``k``'s nodes: its model and graph on their own, the partners'
        starts as extra source nodes, its binding edges and host runs in run node ids."""
        n_a, n_o = self.n_a, self.n_o
        al, ol = self.a_lo[k], self.o_lo[k]
        md = build_model([tl], DropSpec(kinds=DROP_NONE), matching=_alone(tl.rank))
        na, no = int(md.a_start.size), int(md.o_start.size)
        pr = peer[ol:ol + no]
        mine = np.nonzero(pr >= 0)[0]  # its matched kernels (local)
        partner = pr[mine]  # their partners (run op index)
        p_pos = np.searchsorted(np.asarray(self.o_lo), partner, side="right") - 1
        p_start = np.zeros(no, dtype=np.int64)
        p_start[mine] = [int(timelines[p].gpu_start_ns[o - self.o_lo[p]])
                         for p, o in zip(p_pos.tolist(), partner.tolist(), strict=True)]
        ck, xfer, _ = coupled(md.o_start, md.o_end, p_start, pr >= 0, clock[ol:ol + no])
        # each partner's start: one extra node after the rank's source node
        o_peer = np.full(no, -1, dtype=np.int64)
        o_peer[mine] = 2 * no + 1 + np.arange(mine.size)  # node 2 * na + that
        md.o_peer, md.o_xfer, md.o_clock = o_peer, xfer, ck
        extra = [x for x in (inferred_waits(md, tol), seen_stream_waits(md, tol)) if x]
        rec = np.concatenate([md.a_start, md.a_end, md.o_start, md.o_end, [0], p_start[mine]]
                             ).astype(np.int64)
        o_launch = at_or(md.a_start, md.o_top, 0) + np.where(md.o_top >= 0, md.o_off, 0)
        _unneeded_by_graph(md)
        g = build_graph(md, drop=False)
        del md
        src = np.concatenate([g.src, *(x[0] for x in extra)])
        dst = np.concatenate([g.dst, *(x[1] for x in extra)])
        w = np.concatenate([g.w, *(x[2] for x in extra)])
        kind = np.concatenate([g.kind, *(np.full(x[1].size, x[3], dtype=np.int8)
                                         for x in extra)])
        del g, extra
        a_kind = classify.kinds_for_symbols(tl.names)[tl.api_name] if tl.api_name.size \
            else np.zeros(0, dtype=np.int8)
        sync_call = (a_kind == classify.DEVICE) | (a_kind == classify.EVENT)
        b_kind, b_src = binding_edges(src, dst, w, kind, na, no, rec, o_launch, tol, sync_call)
        del src, dst, w, kind
        root = host_runs(b_kind, b_src, na, sync_call)
        # local node -> run node: calls' starts and ends, ops' starts and ends, the source,
        # the partners' starts
        run_id = np.concatenate([
            al + np.arange(na), n_a + al + np.arange(na), 2 * n_a + ol + np.arange(no),
            2 * n_a + n_o + ol + np.arange(no), [2 * n_a + 2 * n_o], 2 * n_a + partner])
        own = 2 * na + 2 * no  # the rank's own nodes (not its source, not the partners)
        at = run_id[:own]
        self.rec[at] = rec[:own]
        self.bind_kind[at] = b_kind[:own]
        bs = b_src[:own]
        self.bind_src[at] = np.where(bs >= 0, run_id[np.maximum(bs, 0)], -1)
        self.host_root[at] = run_id[root[:own]]
        self.o_launch[ol:ol + no] = o_launch
        self.sync_call[al:al + na] = sync_call
        self.a_dev[al:al + na] = a_kind == classify.DEVICE
        self.o_call[ol:ol + no] = launch_calls(tl)

    def node(self, v: int) -> tuple[int, int, int]:
        """Node ``v``'s kind (CS ... SRC), index (call or op; -1 the source), rank position."""
        n_a, n_o = self.n_a, self.n_o
        if v < 2 * n_a:
            i = v if v < n_a else v - n_a
            return (CS if v < n_a else CE), i, bisect_right(self.a_lo, i) - 1
        if v < 2 * n_a + 2 * n_o:
            i = v - 2 * n_a if v < 2 * n_a + n_o else v - 2 * n_a - n_o
            return (OS if v < 2 * n_a + n_o else OE), i, bisect_right(self.o_lo, i) - 1
        return SRC, -1, 0

    def t(self, v: int) -> int:
        """Node ``v``'s aligned time."""
        t = int(self.rec[v])
        return t + self.off[self.node(v)[2]] if self.off else t
