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

import numpy as np
from profplug.analyzers.graph.model import Model

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

    def op_start(self, o: np.ndarray | int) -> np.ndarray | int:
        return 2 * self.n_a + o

    def op_end(self, o: np.ndarray | int) -> np.ndarray | int:
        return 2 * self.n_a + self.n_o + o


def build_graph(m: Model, drop: bool, forced: np.ndarray | None = None,
                into: tuple[int, int] | None = None) -> Graph:
    """The edges of ``m``; ``drop``: the dropped calls do not wait and take their host work
    with them; ``forced``: ops (bool mask) replayed with their recorded duration; ``into``:
    only the edges into nodes ``[lo, hi)`` (a part of the graph, in the same order)."""
    n_a, n_o = int(m.a_start.size), int(m.o_start.size)
    ix = node_ids(2 * n_a + 2 * n_o + 1)
    tops = np.nonzero(m.a_top == np.arange(n_a))[0]
    has_prev = m.a_prev[tops] >= 0
    first, later = tops[~has_prev], tops[has_prev]
    del has_prev
    dropped = m.a_dropped if drop else np.zeros(n_a, dtype=bool)
    keep = ~dropped[m.wait_call]
    paired = m.o_peer >= 0
    if forced is not None:
        paired &= ~forced
    n_hp = int(np.count_nonzero(m.o_prev >= 0))
    # the columns made once, each block written in place (no block kept to be joined: a
    # worker's peak, docs/scale.md); with ``into``, sized for all and cut to what is in
    total = (2 * tops.size + int(np.count_nonzero(keep)) + 2 * n_o + n_hp + m.dep_op.size
             + int(np.count_nonzero(paired)))
    g = Graph(n_a, n_o, np.empty(total, dtype=ix), np.empty(total, dtype=ix),
              np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int8))
    src_node = g.source
    at = 0

    def add(s: np.ndarray | int, d: np.ndarray, w: np.ndarray, kind: int) -> None:
        nonlocal at
        if into is not None:
            inside = (d >= into[0]) & (d < into[1])
            if not inside.all():
                s = s if isinstance(s, int) else s[inside]
                d, w = d[inside], w[inside]
        hi = at + d.size
        g.src[at:hi], g.dst[at:hi], g.w[at:hi], g.kind[at:hi] = s, d, w, kind
        g.parts.append((kind, at, hi))
        at = hi

    calls_s, calls_e, ops_s, ops_e = (0, n_a), (n_a, 2 * n_a), (2 * n_a, 2 * n_a + n_o), \
        (2 * n_a + n_o, 2 * n_a + 2 * n_o)

    def wanted(nodes: tuple[int, int]) -> bool:
        """Whether edges into ``nodes`` ([lo, hi) ids) are asked for: ``into`` skips the
        blocks it would cut away whole (their temporaries are never made)."""
        return into is None or (nodes[0] < into[1] and into[0] < nodes[1])

    if wanted(calls_s):
        add(src_node, first, m.a_start[first], ANCHOR)
        gap = m.a_gap_drop if drop else m.a_gap
        add(n_a + m.a_prev[later], later, gap[later], HOST)
    del first, later
    if wanted(calls_e):
        waits = np.zeros(n_a, dtype=bool)
        waits[m.wait_call] = True
        cost = np.where(dropped, m.a_omin, np.where(waits, m.a_base, m.a_dur))
        add(tops, n_a + tops, cost[tops], CALL)
        del cost, waits
        wc, wo = m.wait_call[keep], m.wait_op[keep]
        add(2 * n_a + n_o + wo, n_a + wc, m.a_wake[wc], SYNC)
        del wc, wo
    del tops
    ops = np.arange(n_o)
    if wanted(ops_s):
        linked = m.o_top >= 0
        lk, un = ops[linked], ops[~linked]
        add(m.o_top[lk], 2 * n_a + lk, m.o_off[lk] + m.o_lat[lk], LAUNCH)
        add(src_node, 2 * n_a + un, m.o_off[un] + m.o_lat[un], ANCHOR)
        del lk, un, linked
        hp = ops[m.o_prev >= 0]
        add(2 * n_a + n_o + m.o_prev[hp], 2 * n_a + hp, m.o_gap[hp], STREAM)
        del hp
        add(2 * n_a + n_o + m.dep_on, 2 * n_a + m.dep_op, m.o_gap[m.dep_op], STREAM_WAIT)
    if wanted(ops_e):
        add(2 * n_a + ops, 2 * n_a + n_o + ops,
            np.where(paired, m.o_xfer, m.o_end - m.o_start), RUN)
        pp = ops[paired]
        add(2 * n_a + m.o_peer[pp], 2 * n_a + n_o + pp, m.o_xfer[pp] - m.o_clock[pp], PEER)
    if at < total:  # ``into``: one column at a time cut to its edges
        for name in ("src", "dst", "w", "kind"):
            setattr(g, name, getattr(g, name)[:at].copy())
    return g


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
    n_a = g.n_a
    w = g.w if in_place else g.w.copy()
    host = g.edges(HOST)
    w[host] = m.a_gap_drop[g.dst[host]]
    call = g.edges(CALL)
    c_src = g.src[call]
    dropped = m.a_dropped[c_src]
    w_call = w[call] if isinstance(call, slice) else None  # a view: written through
    if w_call is not None:
        w_call[dropped] = m.a_omin[c_src[dropped]]
    else:
        w[np.asarray(call)[dropped]] = m.a_omin[c_src[dropped]]
    del c_src, dropped, w_call
    sync = g.span(SYNC)
    out = g if in_place else Graph(n_a, g.n_o, g.src, g.dst, w, g.kind, list(g.parts))
    if sync is None:  # a graph built by hand: by mask
        at = np.nonzero(g.kind == SYNC)[0]
        gone_at = at[m.a_dropped[g.dst[at] - n_a]]
        if gone_at.size:
            keep = np.ones(g.w.size, dtype=bool)
            keep[gone_at] = False
            keep_edges(out, keep)
        out.parts = []
        return out
    # only the sync block changes length: the rest is kept as it is
    lo, hi = sync.start, sync.stop
    ks = ~m.a_dropped[g.dst[lo:hi] - n_a]
    gone = int(hi - lo - ks.sum())
    if gone:
        keep = np.ones(g.w.size, dtype=bool)
        keep[lo:hi] = ks
        keep_edges(out, keep)
    out.parts = [(k, a - gone * (a >= hi), b - gone * (b > lo)) for k, a, b in g.parts]
    return out


def keep_edges(g: Graph, keep: np.ndarray, extra: tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         int] | None = None) -> None:
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
