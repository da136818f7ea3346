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
from profplug.analyzers.graph.events import PEER, Graph, build_graph
from profplug.analyzers.graph.longest_path import MIN_NS, Kahn, first_in_edges
from profplug.analyzers.graph.model import Model
from profplug.analyzers.whatif.fixedpoint import recorded_fixed_point
from profplug.analyzers.whatif.streamruns import Runs
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
    """Per graph node its recorded time (ns): call starts, call ends, op starts, op ends, and
    the source (0)."""
    return np.concatenate([m.a_start, m.a_end, m.o_start, m.o_end, [0]]).astype(
        np.int64, copy=False
    )


def longest_path(
    g: Graph, m: Model, runs: bool = True
) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """Per node its time and binding edge; the ops forced, the nodes released from a cycle
    that holds no NCCL pairing (see the module docstring). ``runs``: solve runs of ops in
    closed form (``streamruns``); a pass that finds a cycle starts again without, so that
    the cycle is broken node by node as documented."""
    t, binding, forced, released = _longest_path(g, m, runs)
    return t, binding(), forced, released


def _longest_path(
    g: Graph, m: Model, runs: bool = True
) -> tuple[np.ndarray, Callable[[], np.ndarray], list[int], list[int]]:
    """:func:`longest_path` with the binding edges left to a function (called on need)."""
    visited = _visited(g, m, runs)
    root, offset_ns, folded, derived = (
        visited.root,
        visited.offset_ns,
        visited.folded,
        visited.derived,
    )
    visited_nodes, edge_kind, edge_dst = visited.nodes, visited.e_kind, visited.e_dst
    source = int(numbered(visited_nodes, np.array([g.source]))[0])
    kahn = Kahn(
        visited_nodes.size,
        numbered(visited_nodes, visited.e_src),
        numbered(visited_nodes, edge_dst),
        visited.e_w,
        [source],
    )
    del visited  # its edges' sources and weights: the pass holds them (the client's peak:
    # docs/scale.md)
    forced: list[int] = []
    released: list[int] = []
    visit_number: np.ndarray | None = None  # per node its number: made only to break a cycle
    while kahn.run() < visited_nodes.size:
        if derived.node.size:  # a cycle: solved again without the runs, node by node
            return _longest_path(g, m, runs=False)
        if visit_number is None:
            visit_number = _numbering(g.n_nodes, visited_nodes)
        _release_one(
            g, m, kahn, root, offset_ns, visit_number, edge_kind, edge_dst, forced, released
        )
    offset_ns[visited_nodes] = kahn.t  # a visited node is a root: its offset is its time
    del kahn, visit_number  # the pass's lists (a Python int each)
    node_ns = _add_root_times(offset_ns, derived, folded, root)
    # the binding edges on need, from the graph and the times alone: a kept replay (the
    # what-if keeps two) holds no per-node array but its times and the folded mask
    return (
        node_ns,
        lambda: _binding(
            g, node_ns, np.nonzero(~folded[g.dst])[0], forced, _single_in_edges(g), folded
        ),
        forced,
        released,
    )


def _release_one(
    g: Graph,
    m: Model,
    kahn: Kahn,
    root: np.ndarray,
    offset_ns: np.ndarray,
    visit_number: np.ndarray,
    edge_kind: np.ndarray,
    edge_dst: np.ndarray,
    forced: list[int],
    released: list[int],
) -> None:
    """Let a pass stuck on a cycle go on: the node :func:`_break_cycle` picks is made ready.
    A forced kernel's end loses its ``peer`` edge and ends its recorded duration after its
    start; another node takes the latest of its timed predecessors (its recorded time if
    none)."""
    t, indeg = kahn.t, kahn.indeg
    node = _break_cycle(
        g, m, root, offset_ns, visit_number, np.asarray(indeg), np.asarray(t), forced, released
    )
    number = int(visit_number[node])
    first_op_end = 2 * g.n_a + g.n_o
    if forced and forced[-1] == node - first_op_end:  # a forced kernel's end
        op = forced[-1]
        start = 2 * g.n_a + op
        t[number] = (
            t[int(visit_number[root[start]])]
            + int(offset_ns[start])
            + int(m.o_end[op] - m.o_start[op])
        )
        kahn.cut(np.flatnonzero((edge_kind == PEER) & (edge_dst == node)))
        indeg[number] -= 1
    else:
        indeg[number] = 0
        if t[number] == MIN_NS:
            t[number] = int(_recorded_times(m)[node])
    if not indeg[number]:
        kahn.ready.append(number)


def _add_root_times(
    offset_ns: np.ndarray, derived: Runs, folded: np.ndarray, root: np.ndarray
) -> np.ndarray:
    """Every node's time, in place of ``offset_ns`` (whose visited nodes hold their times):
    the derived op starts from their two roots, then each folded node adds its root's, a
    piece at a time (no second per-node array: a root is never folded)."""
    node_ns = offset_ns
    node_ns[derived.node] = np.maximum(
        node_ns[derived.h] + derived.a, node_ns[derived.s] + derived.b
    )
    for first in range(0, node_ns.size, _CHUNK):
        folded_here = np.flatnonzero(folded[first : first + _CHUNK])
        piece = node_ns[first : first + _CHUNK]
        piece[folded_here] += node_ns[root[first + folded_here]]
    return node_ns


def _binding(
    g: Graph,
    t: np.ndarray,
    kept: np.ndarray,
    forced: list[int],
    one: np.ndarray,
    folded: np.ndarray,
) -> np.ndarray:
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


def _break_cycle(
    g: Graph,
    m: Model,
    root: np.ndarray,
    offset_ns: np.ndarray,
    visit_number: np.ndarray,
    indeg: np.ndarray,
    t: np.ndarray,
    forced: list[int],
    released: list[int],
) -> int:
    """The node that a stuck pass releases (see the module docstring): the end of the
    earliest started matched NCCL kernel that cannot end (appended to ``forced``), else the
    earliest recorded waiting node (appended to ``released``). ``t``, ``indeg``: the pass's,
    per visited node (``visit_number``)."""
    first_op_start, first_op_end = 2 * g.n_a, 2 * g.n_a + g.n_o
    paired = np.zeros(g.n_o, dtype=bool)
    paired[g.dst[g.kind == PEER] - first_op_end] = True
    end_nodes = np.arange(first_op_end, first_op_end + g.n_o)
    start_nodes = np.arange(first_op_start, first_op_start + g.n_o)
    end_waits = np.zeros(g.n_o, dtype=bool)
    end_number = visit_number[end_nodes]
    end_waits[end_number >= 0] = indeg[end_number[end_number >= 0]] > 0
    start_root_number = visit_number[root[start_nodes]]
    started = (start_root_number >= 0) & (indeg[np.maximum(start_root_number, 0)] == 0)
    stuck = np.nonzero(paired & end_waits & started)[0]
    if stuck.size:
        start_ns = t[visit_number[root[first_op_start + stuck]]] + offset_ns[first_op_start + stuck]
        op = int(stuck[np.argmin(start_ns)])
        forced.append(op)
        return first_op_end + op
    visited_nodes = np.nonzero(visit_number >= 0)[0]
    waiting = visited_nodes[indeg[visit_number[visited_nodes]] > 0]
    node = int(waiting[np.argmin(_recorded_times(m)[waiting])])
    released.append(node)
    return node


def _cycle_warnings(m: Model, forced: list[int], released: list[int]) -> list[str]:
    """One warning per forced NCCL kernel, and one for the nodes released otherwise."""
    warnings = []
    for op in forced:
        partner = int(m.o_peer[op])
        warnings.append(
            f"contradictory NCCL pairing (a cycle in the replay): rank "
            f"{m.o_rank[op]} op #{m.o_local[op]} and its partner, rank "
            f"{m.o_rank[partner]} op #{m.o_local[partner]}, wait for each other "
            "through the host; the first keeps its recorded duration"
        )
    if released:
        warnings.append(
            f"{len(released)} event(s) in a dependency cycle that no NCCL pairing "
            "explains were timed from their timed predecessors (or as recorded)"
        )
    return warnings


def replay(m: Model, drop: bool, *, graph: Graph | None = None) -> Replay:
    """Replay the model; ``drop``: the model's dropped calls do not wait; ``graph``: the
    graph to replay, built for ``drop`` (``m`` may then be ``model.replay_only``), else it is
    built here."""
    g = build_graph(m, drop) if graph is None else graph
    fixed_point = None if drop else recorded_fixed_point(g, _recorded_times(m), lazy=True)
    if fixed_point is not None:  # the recorded times are the replay (fixedpoint.py): no pass
        node_ns, binding = fixed_point
        forced: list[int] = []
        released: list[int] = []
    else:
        node_ns, binding, forced, released = _longest_path(g, m)
    call_start_ns, call_end_ns = _call_times(m, node_ns, g.n_a)
    first_op_start, first_op_end = 2 * g.n_a, 2 * g.n_a + g.n_o
    return Replay(
        call_start_ns,
        call_end_ns,
        node_ns[first_op_start:first_op_end],
        node_ns[first_op_end:-1],
        g,
        node_ns,
        binding,
        forced,
        _cycle_warnings(m, forced, released),
    )


def _call_times(m: Model, node_ns: np.ndarray, n_calls: int) -> tuple[np.ndarray, np.ndarray]:
    """Each call's replayed start and end (ns): a top-level call's from its nodes; a nested
    call moves with its top-level call and stays inside it; an end never before its start."""
    top_start_ns, top_end_ns = node_ns[:n_calls], node_ns[n_calls : 2 * n_calls]
    top = m.a_top
    is_top = top == np.arange(n_calls)
    if is_top.all():  # no nested call
        start_ns, end_ns = top_start_ns, top_end_ns
    else:
        shift_ns = top_start_ns[top] - m.a_start[top]
        its_top_end_ns = top_end_ns[top]
        start_ns = np.where(is_top, top_start_ns, np.minimum(m.a_start + shift_ns, its_top_end_ns))
        end_ns = np.where(is_top, top_end_ns, np.minimum(m.a_end + shift_ns, its_top_end_ns))
    return start_ns, np.maximum(end_ns, start_ns)


def _no_binding() -> np.ndarray:
    raise RuntimeError("the replay's binding edges were let go with its graph")


def times_only(r: Replay) -> Replay:
    """``r`` without its graph and binding edges (``bind`` then raises): what the what-if's
    figures read, its times, and nothing per edge."""
    g = r.graph
    none = np.zeros(0, dtype=np.int64)
    return Replay(
        r.a_start,
        r.a_end,
        r.o_start,
        r.o_end,
        Graph(g.n_a, g.n_o, none, none, none, np.zeros(0, dtype=np.int8)),
        r.t,
        _no_binding,
        r.forced,
        r.warnings,
    )
