"""The replay of a :class:`~.model.Model`: one longest-path pass over its graph (``graph``)
in topological order (all times int64 ns).

Each node's time is the latest of (predecessor's time + edge weight) over its incoming edges;
the edge that gave it is its *binding* edge (``Replay.bind``), from which the critical path
is read (``critical.py``). Kahn's order: a node is timed once all its predecessors are,
so every node is timed exactly once, in O(nodes + edges).

A cycle is a contradictory pairing: two NCCL kernels that each need the other's start
through the host (a kernel's end waits for its partner's start, which waits for a
synchronize that waits for that kernel's end). When no node is ready, the documented way
out is taken: of the matched NCCL kernels that have started but cannot end, the earliest
one keeps its recorded duration (its ``peer`` edge is dropped: it is *forced*), and a
warning names both kernels and their ranks. Should a cycle hold no such kernel (an
inconsistent trace), the earliest-recorded waiting node takes the latest of its timed
predecessors (its recorded time if none), and a warning says so. No node stays untimed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .graph import CALL, PEER, RUN, Graph, build_graph
from .model import Model

MIN_NS = -(2**62)


@dataclass
class Replay:
    """Replayed start/end ns per API call (``a_*``) and per GPU op (``o_*``); the graph,
    every node's time and binding edge (-1: none, the source or a nested call)."""

    a_start: np.ndarray
    a_end: np.ndarray
    o_start: np.ndarray
    o_end: np.ndarray
    graph: Graph
    t: np.ndarray
    bind: np.ndarray
    forced: list[int] = field(default_factory=list)  # NCCL kernels given their duration
    warnings: list[str] = field(default_factory=list)


def _recorded_times(m: Model) -> np.ndarray:
    return np.concatenate([m.a_start, m.a_end, m.o_start, m.o_end, [0]]).astype(np.int64)


def longest_path(g: Graph, m: Model) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """Per node its time and binding edge; the ops forced, the nodes released from a cycle
    that holds no NCCL pairing (see the module docstring)."""
    n = g.n_nodes
    indeg_a = np.bincount(g.dst, minlength=n)
    # An end node whose only predecessor is its own start (a call that waits for nothing, an
    # op that is not a matched NCCL kernel) is timed after the pass: its out-edges leave from
    # the start with the run's weight added, so the pass visits half the nodes.
    thru = np.nonzero(((g.kind == CALL) | (g.kind == RUN)) & (indeg_a[g.dst] == 1))[0]
    via = np.full(n, -1, dtype=np.int64)
    via[g.dst[thru]] = thru
    e_src = g.src.copy()
    e_w = g.w.copy()
    moved = via[e_src] >= 0
    e_w[moved] += g.w[via[e_src[moved]]]
    e_src[moved] = g.src[via[e_src[moved]]]
    keep = via[g.dst] < 0
    keep &= ~np.isin(np.arange(g.src.size), thru)
    kept = np.nonzero(keep)[0]
    order = kept[np.argsort(e_src[kept], kind="stable")]
    ptr = np.searchsorted(e_src[order], np.arange(n + 1)).tolist()
    dst, w, eid = g.dst[order].tolist(), e_w[order].tolist(), order.tolist()
    indeg_a[g.dst[thru]] = 0
    indeg = indeg_a.tolist()
    t = [MIN_NS] * n
    bind = [-1] * n
    t[g.source] = 0
    ready = indeg_a == 0
    ready[g.dst[thru]] = False
    stack = np.nonzero(ready)[0].tolist()
    stack.reverse()
    done = int(thru.size)
    forced: list[int] = []
    released: list[int] = []
    run_edge = peer_edge = np.zeros(0, dtype=np.int64)
    while True:
        while stack:
            u = stack.pop()
            done += 1
            tu = t[u]
            for k in range(ptr[u], ptr[u + 1]):
                v = dst[k]
                c = tu + w[k]
                if c > t[v]:
                    t[v] = c
                    bind[v] = eid[k]
                indeg[v] -= 1
                if not indeg[v]:
                    stack.append(v)
        if done == n:
            break
        if not run_edge.size:  # per op: its run and peer edge ids
            run_edge = np.full(g.n_o, -1, dtype=np.int64)
            peer_edge = np.full(g.n_o, -1, dtype=np.int64)
            r = np.nonzero(g.kind == RUN)[0]
            run_edge[g.dst[r] - 2 * g.n_a - g.n_o] = r
            p = np.nonzero(g.kind == PEER)[0]
            peer_edge[g.dst[p] - 2 * g.n_a - g.n_o] = p
        ta = np.asarray(indeg)
        o_s0, o_e0 = 2 * g.n_a, 2 * g.n_a + g.n_o
        stuck = np.nonzero((peer_edge >= 0) & (ta[o_e0:o_e0 + g.n_o] > 0)
                           & (ta[o_s0:o_s0 + g.n_o] == 0))[0]
        if stuck.size:
            st = np.asarray(t, dtype=np.int64)[o_s0 + stuck]
            j = int(stuck[np.argmin(st)])
            forced.append(j)
            v = o_e0 + j
            re = int(run_edge[j])
            indeg[v] -= 1  # the peer edge is gone
            t[v] = t[o_s0 + j] + int(m.o_end[j] - m.o_start[j])
            bind[v] = re
        else:  # a cycle without a NCCL pairing: release its earliest recorded node
            waiting = np.nonzero(ta > 0)[0]
            rec = _recorded_times(m)[waiting]
            v = int(waiting[np.argmin(rec)])
            released.append(v)
            indeg[v] = 0
            if t[v] == MIN_NS:
                t[v] = int(_recorded_times(m)[v])
        if not indeg[v]:
            stack.append(v)
    t_a = np.asarray(t, dtype=np.int64)
    t_a[g.dst[thru]] = t_a[g.src[thru]] + g.w[thru]
    b_a = np.asarray(bind, dtype=np.int64)
    b_a[g.dst[thru]] = thru
    return t_a, b_a, forced, released


def _cycle_warnings(m: Model, forced: list[int], released: list[int]) -> list[str]:
    out = []
    for j in forced:
        q = int(m.o_peer[j])
        out.append(f"contradictory NCCL pairing (a cycle in the replay): rank {m.o_rank[j]} op "
                   f"#{m.o_local[j]} and its partner, rank {m.o_rank[q]} op #{m.o_local[q]}, "
                   "wait for each other through the host; the first keeps its recorded "
                   "duration")
    if released:
        out.append(f"{len(released)} event(s) in a dependency cycle that no NCCL pairing "
                   "explains were timed from their timed predecessors (or as recorded)")
    return out


def replay(m: Model, drop: bool) -> Replay:
    """Replay the model; ``drop``: the model's dropped calls do not wait."""
    g = build_graph(m, drop)
    t, bind, forced, released = longest_path(g, m)
    n_a, n_o = g.n_a, g.n_o
    top_s, top_e = t[:n_a], t[n_a:2 * n_a]
    shift = top_s[m.a_top] - m.a_start[m.a_top]
    is_top = m.a_top == np.arange(n_a)
    a_s = np.where(is_top, top_s, m.a_start + shift)
    a_e = np.where(is_top, top_e, np.minimum(m.a_end + shift, top_e[m.a_top]))
    return Replay(a_s, np.maximum(a_e, a_s), t[2 * n_a:2 * n_a + n_o], t[2 * n_a + n_o:-1],
                  g, t, bind, forced, _cycle_warnings(m, forced, released))
