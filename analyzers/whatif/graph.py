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

from .model import Model

KINDS = ("anchor", "host", "call", "sync", "launch", "stream", "stream_wait", "run", "peer")
ANCHOR, HOST, CALL, SYNC, LAUNCH, STREAM, STREAM_WAIT, RUN, PEER = range(len(KINDS))


@dataclass
class Graph:
    """Edge arrays over the nodes of a model (see the module docstring for ids)."""

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

    def call_start(self, a: np.ndarray | int) -> np.ndarray | int:
        return a

    def call_end(self, a: np.ndarray | int) -> np.ndarray | int:
        return self.n_a + a

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
    g = Graph(n_a, n_o, *(np.zeros(0, dtype=np.int64),) * 3, np.zeros(0, dtype=np.int8))
    src_node = g.source
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []

    def add(s: np.ndarray | int, d: np.ndarray, w: np.ndarray, kind: int) -> None:
        src = np.full(d.size, s, dtype=np.int64) if isinstance(s, int) else s
        if into is not None:
            inside = (d >= into[0]) & (d < into[1])
            if not inside.all():
                src, d, w = src[inside], d[inside], w[inside]
        parts.append((src, d, w, kind))

    tops = np.nonzero(m.a_top == np.arange(n_a))[0]
    first = tops[m.a_prev[tops] < 0]
    later = tops[m.a_prev[tops] >= 0]
    add(src_node, first, m.a_start[first], ANCHOR)
    gap = m.a_gap_drop if drop else m.a_gap
    add(n_a + m.a_prev[later], later, gap[later], HOST)
    dropped = m.a_dropped if drop else np.zeros(n_a, dtype=bool)
    waits = np.zeros(n_a, dtype=bool)
    waits[m.wait_call] = True
    cost = np.where(dropped, m.a_omin, np.where(waits, m.a_base, m.a_dur))
    add(tops, n_a + tops, cost[tops], CALL)
    keep = ~dropped[m.wait_call]
    wc, wo = m.wait_call[keep], m.wait_op[keep]
    add(2 * n_a + n_o + wo, n_a + wc, m.a_wake[wc], SYNC)
    ops = np.arange(n_o)
    linked = m.o_top >= 0
    lk, un = ops[linked], ops[~linked]
    add(m.o_top[lk], 2 * n_a + lk, m.o_off[lk] + m.o_lat[lk], LAUNCH)
    add(src_node, 2 * n_a + un, m.o_off[un] + m.o_lat[un], ANCHOR)
    hp = ops[m.o_prev >= 0]
    add(2 * n_a + n_o + m.o_prev[hp], 2 * n_a + hp, m.o_gap[hp], STREAM)
    add(2 * n_a + n_o + m.dep_on, 2 * n_a + m.dep_op, m.o_gap[m.dep_op], STREAM_WAIT)
    paired = m.o_peer >= 0
    if forced is not None:
        paired &= ~forced
    add(2 * n_a + ops, 2 * n_a + n_o + ops,
        np.where(paired, m.o_xfer, m.o_end - m.o_start), RUN)
    pp = ops[paired]
    add(2 * n_a + m.o_peer[pp], 2 * n_a + n_o + pp, m.o_xfer[pp] - m.o_clock[pp], PEER)
    sizes = [p[1].size for p in parts]
    kinds = [p[3] for p in parts]
    g.kind = np.repeat(np.array(kinds, dtype=np.int8), sizes)
    ends = np.cumsum(sizes).tolist()
    g.parts = [(k, e - n, e) for k, n, e in zip(kinds, sizes, ends, strict=True)]
    # each column's parts go once it is joined (the client's peak: docs/scale.md)
    g.src = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
    dw = [(p[1], p[2]) for p in parts]
    parts.clear()
    g.dst = np.concatenate([d for d, _ in dw]).astype(np.int64, copy=False)
    ws = [w for _, w in dw]
    dw.clear()
    g.w = np.concatenate(ws).astype(np.int64, copy=False)
    return g


DROPPED_GRAPH_READS = ("a_gap_drop", "a_omin")  # of the model's graph inputs (model._IN_GRAPH)


def dropped_graph(g: Graph, m: Model) -> Graph:
    """``build_graph(m, drop=True)`` from ``g = build_graph(m, drop=False)``: the same edges in
    the same order (binding edges are the lowest-numbered), less the dropped calls' ``sync``
    edges, with the dropped calls' ``host`` and ``call`` weights; one graph's arrays serve
    both replays instead of building the edges twice."""
    n_a = g.n_a
    w = g.w.copy()
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
    sync = g.span(SYNC)
    if sync is None:  # a graph built by hand: by mask
        keep = np.ones(g.w.size, dtype=bool)
        at = np.nonzero(g.kind == SYNC)[0]
        keep[at[m.a_dropped[g.dst[at] - n_a]]] = False
        return Graph(n_a, g.n_o, g.src[keep], g.dst[keep], w[keep], g.kind[keep])
    # only the sync block changes length: the rest is copied as it is
    lo, hi = sync.start, sync.stop
    ks = ~m.a_dropped[g.dst[lo:hi] - n_a]
    gone = int(hi - lo - ks.sum())

    def cut(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a[:lo], a[lo:hi][ks], a[hi:]])

    parts = [(k, a - gone * (a >= hi), b - gone * (b > lo)) for k, a, b in g.parts]
    return Graph(n_a, g.n_o, cut(g.src), cut(g.dst), cut(w), cut(g.kind), parts)
