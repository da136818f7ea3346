"""The run's dependency graph: the model's rules as edge arrays (all weights int64 ns).

Nodes: the start and the end of every top-level host API call, the start and the end of every
GPU op, and one source node ``SRC`` at time 0 (recorded constants hang off it). A node's time
is the latest of its predecessors' times plus the edge's weight, so a replay is one
longest-path pass (``simulate``). Edge kinds (``KINDS``):

| kind | from -> to | weight |
| --- | --- | --- |
| ``anchor`` | SRC -> a thread's first call's start; SRC -> an unlinked op's start | the recorded start (+ latency) |
| ``host`` | a call's end -> the next top-level call's start on its thread | the host gap (shortened by a dropped call's own range) |
| ``call`` | a call's start -> its end | its cost when it does not wait (``a_dur``, ``a_base``; ``a_omin`` when dropped) |
| ``sync`` | an awaited op's end -> the blocking call's end | the wake-up (``a_wake``); none when the call is dropped |
| ``launch`` | the launching (top-level) call's start -> the op's start | launch offset + latency |
| ``stream`` | the previous op's end on the stream -> the op's start | the queue gap |
| ``stream_wait`` | an op awaited through cudaStreamWaitEvent: its end -> the op's start | the queue gap |
| ``run`` | an op's start -> its end | its duration; a matched NCCL kernel: its transfer |
| ``peer`` | the matched partner's start -> a NCCL kernel's end | transfer - clock offset |

A ``forced`` NCCL kernel (a pairing the replay found contradictory: a cycle) has no ``peer``
edge and its ``run`` edge weighs its recorded duration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
from profplug.analyzers.graph.model import Model

OpIds = TypeVar("OpIds", np.ndarray, int)  # one op id or an array of them

KINDS = ("anchor", "host", "call", "sync", "launch", "stream", "stream_wait", "run", "peer")
ANCHOR, HOST, CALL, SYNC, LAUNCH, STREAM, STREAM_WAIT, RUN, PEER = range(len(KINDS))


@dataclass
class Graph:
    """Edge arrays over the nodes of a model (see the module docstring for ids): ``src`` and
    ``dst`` node ids (int32 where they fit: :func:`node_ids`), ``w`` int64 ns."""

    n_a: int
    n_o: int
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray
    kind: np.ndarray  # int8, one of KINDS' indices
    # the edges as blocks of one kind, in order: (kind, first, end); empty: not known (a
    # graph built by hand), then ``span`` finds none and callers read ``kind``
    parts: list[tuple[int, int, int]] = field(default_factory=list)

    def span(self, kind: int) -> slice | None:
        """The edges of ``kind`` as one slice, when they are one block (``parts``)."""
        blocks = [(lo, hi) for k, lo, hi in self.parts if k == kind]
        return slice(*blocks[0]) if len(blocks) == 1 else None

    def edges(self, kind: int) -> np.ndarray | slice:
        """The edges of ``kind``: their block, else their indices."""
        sl = self.span(kind)
        return sl if sl is not None else np.nonzero(self.kind == kind)[0]

    @property
    def n_nodes(self) -> int:
        return 2 * self.n_a + 2 * self.n_o + 1

    @property
    def source(self) -> int:
        return 2 * self.n_a + 2 * self.n_o

    def op_start(self, o: OpIds) -> OpIds:
        return 2 * self.n_a + o

    def op_end(self, o: OpIds) -> OpIds:
        return 2 * self.n_a + self.n_o + o


def build_graph(m: Model, drop: bool, forced: np.ndarray | None = None,
                into: tuple[int, int] | None = None) -> Graph:
    """The edges of ``m``; ``drop``: the dropped calls do not wait and take their host work
    with them; ``forced``: ops (bool mask) replayed with their recorded duration; ``into``:
    only the edges into nodes ``[lo, hi)`` (a part of the graph, in the same order)."""
    n_a, n_o = int(m.a_start.size), int(m.o_start.size)
    tops = np.nonzero(m.a_top == np.arange(n_a))[0]
    dropped = m.a_dropped if drop else np.zeros(n_a, dtype=bool)
    keep = ~dropped[m.wait_call]
    paired = m.o_peer >= 0
    if forced is not None:
        paired &= ~forced
    out = _Writer(_empty_graph(m, int(tops.size), keep, paired), into)
    # blocks by the nodes their edges go into: calls' starts, calls' ends, ops' starts, ends
    if out.wanted(0, n_a):
        _call_start_edges(out, m, tops, drop)
    if out.wanted(n_a, 2 * n_a):
        _call_end_edges(out, m, tops, dropped, keep)
    del tops
    ops = np.arange(n_o)
    if out.wanted(2 * n_a, 2 * n_a + n_o):
        _op_start_edges(out, m, ops)
    if out.wanted(2 * n_a + n_o, 2 * n_a + 2 * n_o):
        _op_end_edges(out, m, ops, paired)
    return out.finish()


def _empty_graph(m: Model, n_tops: int, keep: np.ndarray, paired: np.ndarray) -> Graph:
    """The graph's columns for all its edges, unwritten: made once, each block written in
    place (no block kept to be joined: a worker's peak, docs/scale.md). ``keep``: per wait,
    whether its ``sync`` edge is made; ``paired``: per op, whether it has a ``peer`` edge."""
    n_a, n_o = int(m.a_start.size), int(m.o_start.size)
    ix = node_ids(2 * n_a + 2 * n_o + 1)
    n_hp = int(np.count_nonzero(m.o_prev >= 0))
    total = (2 * n_tops + int(np.count_nonzero(keep)) + 2 * n_o + n_hp + m.dep_op.size
             + int(np.count_nonzero(paired)))
    return Graph(n_a, n_o, np.empty(total, dtype=ix), np.empty(total, dtype=ix),
                 np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int8))


class _Writer:
    """Writes blocks of edges of one kind into a graph's columns in turn; ``into``: only the
    edges into nodes ``[lo, hi)``, the columns cut to them at the end."""

    def __init__(self, g: Graph, into: tuple[int, int] | None) -> None:
        self.g, self.into, self.at = g, into, 0

    def wanted(self, lo: int, hi: int) -> bool:
        """Whether edges into nodes ``[lo, hi)`` are asked for: ``into`` skips the blocks it
        would cut away whole (their temporaries are never made)."""
        return self.into is None or (lo < self.into[1] and self.into[0] < hi)

    def add(self, s: np.ndarray | int, d: np.ndarray, w: np.ndarray, kind: int) -> None:
        """Edges ``s`` -> ``d`` of weight ``w`` (ns), all of ``kind``."""
        if self.into is not None:
            inside = (d >= self.into[0]) & (d < self.into[1])
            if not inside.all():
                s = s if isinstance(s, int) else s[inside]
                d, w = d[inside], w[inside]
        g, at = self.g, self.at
        hi = at + d.size
        g.src[at:hi], g.dst[at:hi], g.w[at:hi], g.kind[at:hi] = s, d, w, kind
        g.parts.append((kind, at, hi))
        self.at = hi

    def finish(self) -> Graph:
        g = self.g
        if self.at < g.w.size:  # ``into``: one column at a time cut to its edges
            for name in ("src", "dst", "w", "kind"):
                setattr(g, name, getattr(g, name)[:self.at].copy())
        return g


def _call_start_edges(out: _Writer, m: Model, tops: np.ndarray, drop: bool) -> None:
    """Into the top-level calls' starts: ``anchor`` (a thread's first call) and ``host``."""
    has_prev = m.a_prev[tops] >= 0
    first, later = tops[~has_prev], tops[has_prev]
    del has_prev
    out.add(out.g.source, first, m.a_start[first], ANCHOR)
    gap = m.a_gap_drop if drop else m.a_gap
    out.add(out.g.n_a + m.a_prev[later], later, gap[later], HOST)


def _call_end_edges(out: _Writer, m: Model, tops: np.ndarray, dropped: np.ndarray,
                    keep: np.ndarray) -> None:
    """Into the top-level calls' ends: ``call`` (its cost) and the kept waits' ``sync``."""
    n_a, n_o = out.g.n_a, out.g.n_o
    waits = np.zeros(n_a, dtype=bool)
    waits[m.wait_call] = True
    cost = np.where(dropped, m.a_omin, np.where(waits, m.a_base, m.a_dur))
    out.add(tops, n_a + tops, cost[tops], CALL)
    del cost, waits
    wc, wo = m.wait_call[keep], m.wait_op[keep]
    out.add(2 * n_a + n_o + wo, n_a + wc, m.a_wake[wc], SYNC)


def _op_start_edges(out: _Writer, m: Model, ops: np.ndarray) -> None:
    """Into the ops' starts: ``launch`` (``anchor`` for an op no call launched), ``stream``
    and ``stream_wait``."""
    n_a, n_o = out.g.n_a, out.g.n_o
    linked = m.o_top >= 0
    lk, un = ops[linked], ops[~linked]
    out.add(m.o_top[lk], 2 * n_a + lk, m.o_off[lk] + m.o_lat[lk], LAUNCH)
    out.add(out.g.source, 2 * n_a + un, m.o_off[un] + m.o_lat[un], ANCHOR)
    del lk, un, linked
    hp = ops[m.o_prev >= 0]
    out.add(2 * n_a + n_o + m.o_prev[hp], 2 * n_a + hp, m.o_gap[hp], STREAM)
    del hp
    out.add(2 * n_a + n_o + m.dep_on, 2 * n_a + m.dep_op, m.o_gap[m.dep_op], STREAM_WAIT)


def _op_end_edges(out: _Writer, m: Model, ops: np.ndarray, paired: np.ndarray) -> None:
    """Into the ops' ends: ``run`` (a paired NCCL kernel: its transfer) and ``peer``."""
    n_a, n_o = out.g.n_a, out.g.n_o
    out.add(2 * n_a + ops, 2 * n_a + n_o + ops,
            np.where(paired, m.o_xfer, m.o_end - m.o_start), RUN)
    pp = ops[paired]
    out.add(2 * n_a + m.o_peer[pp], 2 * n_a + n_o + pp, m.o_xfer[pp] - m.o_clock[pp], PEER)


def node_ids(n_nodes: int) -> type[np.signedinteger]:
    """The dtype of a graph's node ids: int32 where they fit (half the bytes per edge)."""
    return np.int32 if n_nodes < 2**31 else np.int64


DROPPED_GRAPH_READS = ("a_gap_drop", "a_omin")  # of the model's graph inputs (model._IN_GRAPH)


def dropped_graph(g: Graph, m: Model, *, in_place: bool = False) -> Graph:
    """``build_graph(m, drop=True)`` from ``g = build_graph(m, drop=False)``: the same edges in
    the same order (binding edges are the lowest-numbered), less the dropped calls' ``sync``
    edges, with the dropped calls' ``host`` and ``call`` weights; one graph's arrays serve
    both replays instead of building the edges twice. Arrays that do not change are shared
    with ``g`` (none is written in place by anyone); ``in_place``: ``g`` itself becomes the
    dropped graph, its columns replaced one at a time (a worker's peak: one column more
    than the graph, not a second graph: docs/scale.md)."""
    w = _dropped_weights(g, m, g.w if in_place else g.w.copy())
    out = g if in_place else Graph(g.n_a, g.n_o, g.src, g.dst, w, g.kind, list(g.parts))
    sync = g.span(SYNC)
    if sync is None:  # a graph built by hand: by mask
        _drop_syncs_by_mask(out, m)
        out.parts = []
        return out
    # only the sync block changes length: the rest is kept as it is
    first, end = sync.start, sync.stop
    sync_kept = ~m.a_dropped[g.dst[first:end] - g.n_a]
    n_gone = int(end - first - sync_kept.sum())
    if n_gone:
        keep = np.ones(g.w.size, dtype=bool)
        keep[first:end] = sync_kept
        keep_edges(out, keep)
    out.parts = [(kind, lo - n_gone * (lo >= end), hi - n_gone * (hi > first))
                 for kind, lo, hi in g.parts]
    return out


def _dropped_weights(g: Graph, m: Model, w: np.ndarray) -> np.ndarray:
    """``w`` (``g``'s weights or a copy), written in place with the drop replay's ``host``
    gaps and the dropped calls' ``call`` costs (``a_omin``)."""
    host = g.edges(HOST)
    w[host] = m.a_gap_drop[g.dst[host]]
    call = g.edges(CALL)
    call_src = g.src[call]
    dropped = m.a_dropped[call_src]
    if isinstance(call, slice):  # a block: written through a view, no index array made
        w[call][dropped] = m.a_omin[call_src[dropped]]
    else:
        w[call[dropped]] = m.a_omin[call_src[dropped]]
    return w


def _drop_syncs_by_mask(g: Graph, m: Model) -> None:
    """``g`` without the dropped calls' ``sync`` edges, found by kind (no blocks known)."""
    syncs = np.nonzero(g.kind == SYNC)[0]
    gone = syncs[m.a_dropped[g.dst[syncs] - g.n_a]]
    if gone.size:
        keep = np.ones(g.w.size, dtype=bool)
        keep[gone] = False
        keep_edges(g, keep)


def keep_edges(g: Graph, keep: np.ndarray, extra: tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         np.ndarray] | None = None) -> None:
    """Keep ``g``'s edges where ``keep`` (bool per edge), ``extra`` edges ``(src, dst, w,
    kind)`` appended, in place: each column replaced in turn, so that one column more than
    the graph is live at a time. ``parts`` is the caller's to set."""
    n = int(np.count_nonzero(keep))
    k = 0 if extra is None else int(extra[0].size)
    for name, x in (("src", 0), ("dst", 1), ("w", 2), ("kind", 3)):
        old = getattr(g, name)
        new = np.empty(n + k, dtype=old.dtype)
        at = 0
        for lo in range(0, old.size, _CHUNK):  # numpy's compress makes a temporary per call
            part = old[lo:lo + _CHUNK][keep[lo:lo + _CHUNK]]
            new[at:at + part.size] = part
            at += part.size
        if extra is not None:
            new[n:] = extra[x]
        del old
        setattr(g, name, new)


_CHUNK = 1 << 16  # edges per piece of keep_edges' copy (its temporaries: ~0.5 MB)
