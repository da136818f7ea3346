"""The replay of a :class:`~.model.Model`: one longest-path pass over its graph (``graph``)
in topological order (all times int64 ns).

Each node's time is the latest of (predecessor's time + edge weight) over its incoming edges;
the edge that gave it is its *binding* edge (``Replay.bind``), from which the critical path
is read (``critical.py``). Kahn's order (the what-if's solver: ``longest_path.Kahn``, over
the nodes the fold leaves: ``visited``): a node is timed once all its predecessors are, so
every node is timed exactly once, in O(nodes + edges).

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

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from profplug.analyzers.graph.events import PEER, Graph, build_graph, dropped_graph
from profplug.analyzers.graph.longest_path import MIN_NS, Kahn, first_in_edges
from profplug.analyzers.graph.model import Model
from profplug.analyzers.whatif.fixedpoint import recorded_fixed_point
from profplug.analyzers.whatif.visited import (
    _CHUNK,
    _numbering,
    _single_in_edges,
    _visited,
    numbered,
)


@dataclass
class Replay:
    """Replayed start/end ns per API call (``a_*``) and per GPU op (``o_*``); the graph,
    every node's time and binding edge (``bind``, -1: none, the source or a nested call;
    found on first use: the what-if's figures need only the times)."""

    a_start: np.ndarray
    a_end: np.ndarray
    o_start: np.ndarray
    o_end: np.ndarray
    graph: Graph
    t: np.ndarray
    binding: Callable[[], np.ndarray]  # computes ``bind``
    forced: list[int] = field(default_factory=list)  # NCCL kernels given their duration
    warnings: list[str] = field(default_factory=list)
    _bind: np.ndarray | None = field(default=None, repr=False)

    @property
    def bind(self) -> np.ndarray:
        if self._bind is None:
            self._bind = self.binding()
        return self._bind


def _recorded_times(m: Model) -> np.ndarray:
    return np.concatenate([m.a_start, m.a_end, m.o_start, m.o_end, [0]]).astype(np.int64,
                                                                              copy=False)


def longest_path(g: Graph, m: Model, runs: bool = True
                 ) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """Per node its time and binding edge; the ops forced, the nodes released from a cycle
    that holds no NCCL pairing (see the module docstring). ``runs``: solve runs of ops in
    closed form (``streamruns``); a pass that finds a cycle starts again without, so that
    the cycle is broken node by node as documented."""
    t, binding, forced, released = _longest_path(g, m, runs)
    return t, binding(), forced, released


def _longest_path(g: Graph, m: Model, runs: bool = True
                  ) -> tuple[np.ndarray, Callable[[], np.ndarray], list[int], list[int]]:
    """:func:`longest_path` with the binding edges left to a function (called on need)."""
    n = g.n_nodes
    vis = _visited(g, m, runs)
    root, off, folded, rn, proc = vis.root, vis.off, vis.folded, vis.rn, vis.proc
    e_src, e_w, e_kind, e_dst = vis.e_src, vis.e_w, vis.e_kind, vis.e_dst
    del vis
    cid: np.ndarray | None = None  # per node its number: made only to break a cycle
    src_of = numbered(proc, np.array([g.source]))[0]
    kahn = Kahn(proc.size, numbered(proc, e_src), numbered(proc, e_dst), e_w, [int(src_of)])
    del e_src, e_w  # (the client's peak: docs/scale.md)
    forced: list[int] = []
    released: list[int] = []
    t, indeg = kahn.t, kahn.indeg
    while kahn.run() < proc.size:
        if rn.node.size:
            return _longest_path(g, m, runs=False)
        if cid is None:
            cid = _numbering(n, proc)
        v = _break_cycle(g, m, root, off, cid, np.asarray(indeg), np.asarray(t), forced,
                         released)
        cv = int(cid[v])
        if forced and forced[-1] == v - 2 * g.n_a - g.n_o:  # the peer edge is gone
            j = forced[-1]
            s0 = 2 * g.n_a + j
            t[cv] = t[int(cid[root[s0]])] + int(off[s0]) + int(m.o_end[j] - m.o_start[j])
            kahn.cut(np.flatnonzero((e_kind == PEER) & (e_dst == v)))
            indeg[cv] -= 1
        else:
            indeg[cv] = 0
            if t[cv] == MIN_NS:
                t[cv] = int(_recorded_times(m)[v])
        if not indeg[cv]:
            kahn.ready.append(cv)
    # every root's time into ``off`` (a root's offset is 0): the visited nodes', then the
    # derived op starts' from their two roots (visited nodes); then each folded node adds
    # its root's, a piece at a time (no second per-node array: a root is never folded)
    off[proc] = t
    del kahn, t, indeg, cid  # the pass's lists (a Python int each)
    off[rn.node] = np.maximum(off[rn.h] + rn.a, off[rn.s] + rn.b)
    for lo in range(0, n, _CHUNK):
        f = np.flatnonzero(folded[lo:lo + _CHUNK])
        part = off[lo:lo + _CHUNK]
        part[f] += off[root[lo + f]]
    t_a = off
    # the binding edges on need, from the graph and the times alone: a kept replay (the
    # what-if keeps two) holds no per-node array but its times and the folded mask
    return t_a, lambda: _binding(g, t_a, np.nonzero(~folded[g.dst])[0], forced,
                                 _single_in_edges(g), folded), forced, released


def _binding(g: Graph, t: np.ndarray, kept: np.ndarray, forced: list[int], one: np.ndarray,
             folded: np.ndarray) -> np.ndarray:
    """Per node, the edge that gave its time (the lowest-numbered of several), -1 none: a
    folded node's one in-edge; else an in-edge whose source time plus weight is the node's
    time (a forced kernel's peer edge excluded)."""
    val = t[g.src[kept]] + g.w[kept]
    if forced:
        ends = 2 * g.n_a + g.n_o + np.asarray(forced, dtype=np.int64)
        val[(g.kind[kept] == PEER) & np.isin(g.dst[kept], ends)] = MIN_NS
    e = kept[val == t[g.dst[kept]]]
    first = e[first_in_edges(g.dst[e])]  # per node its lowest-numbered tight edge
    out = np.full(g.n_nodes, -1, dtype=np.int64)
    out[g.dst[first]] = first
    in_e = np.full(g.n_nodes, -1, dtype=np.int64)  # a single-predecessor node's one in-edge
    in_e[g.dst[one]] = one
    out[folded] = in_e[folded]
    return out


def _break_cycle(g: Graph, m: Model, root: np.ndarray, off: np.ndarray, cid: np.ndarray,
                 indeg: np.ndarray, t: np.ndarray, forced: list[int], released: list[int]
                 ) -> int:
    """The node that a stuck pass releases (see the module docstring): the end of the
    earliest started matched NCCL kernel that cannot end (appended to ``forced``), else the
    earliest recorded waiting node (appended to ``released``)."""
    o_s0, o_e0 = 2 * g.n_a, 2 * g.n_a + g.n_o
    paired = np.zeros(g.n_o, dtype=bool)
    paired[g.dst[g.kind == PEER] - o_e0] = True
    ends, starts = np.arange(o_e0, o_e0 + g.n_o), np.arange(o_s0, o_s0 + g.n_o)
    waiting_end = np.zeros(g.n_o, dtype=bool)
    ce = cid[ends]
    waiting_end[ce >= 0] = indeg[ce[ce >= 0]] > 0
    cs = cid[root[starts]]
    started = (cs >= 0) & (indeg[np.maximum(cs, 0)] == 0)
    stuck = np.nonzero(paired & waiting_end & started)[0]
    if stuck.size:
        st = t[cid[root[o_s0 + stuck]]] + off[o_s0 + stuck]
        j = int(stuck[np.argmin(st)])
        forced.append(j)
        return o_e0 + j
    proc = np.nonzero(cid >= 0)[0]
    waiting = proc[indeg[cid[proc]] > 0]
    v = int(waiting[np.argmin(_recorded_times(m)[waiting])])
    released.append(v)
    return v


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


def replay(m: Model, drop: bool, recorded: Graph | None = None, *,
           graph: Graph | None = None) -> Replay:
    """Replay the model; ``drop``: the model's dropped calls do not wait; ``recorded``: the
    graph of ``m`` as recorded (``build_graph(m, False)``), when the caller has it;
    ``graph``: the graph to replay, built for ``drop`` (``m`` may then be
    ``model.replay_only``)."""
    if graph is not None:
        g = graph
    elif recorded is None:
        g = build_graph(m, drop)
    else:
        g = dropped_graph(recorded, m) if drop else recorded
    fp = None if drop else recorded_fixed_point(g, _recorded_times(m), lazy=True)
    if fp is not None:  # the recorded times are the replay (fixedpoint.py): no pass needed
        t, binding = fp
        forced: list[int] = []
        released: list[int] = []
    else:
        t, binding, forced, released = _longest_path(g, m)
    n_a, n_o = g.n_a, g.n_o
    top_s, top_e = t[:n_a], t[n_a:2 * n_a]
    at = m.a_top
    is_top = at == np.arange(n_a)
    if is_top.all():  # no nested call
        a_s, a_e = top_s, top_e
    else:  # a nested call moves with its top-level call and stays inside it
        shift = top_s[at] - m.a_start[at]
        te = top_e[at]
        a_s = np.where(is_top, top_s, np.minimum(m.a_start + shift, te))
        a_e = np.where(is_top, top_e, np.minimum(m.a_end + shift, te))
    return Replay(a_s, np.maximum(a_e, a_s), t[2 * n_a:2 * n_a + n_o], t[2 * n_a + n_o:-1],
                  g, t, binding, forced, _cycle_warnings(m, forced, released))


def _no_binding() -> np.ndarray:
    raise RuntimeError("the replay's binding edges were let go with its graph")


def times_only(r: Replay) -> Replay:
    """``r`` without its graph and binding edges (``bind`` then raises): what the what-if's
    figures read, its times, and nothing per edge."""
    g = r.graph
    none = np.zeros(0, dtype=np.int64)
    return Replay(r.a_start, r.a_end, r.o_start, r.o_end,
                  Graph(g.n_a, g.n_o, none, none, none, np.zeros(0, dtype=np.int8)), r.t,
                  _no_binding, r.forced, r.warnings)
