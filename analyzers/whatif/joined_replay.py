"""One rank's replay graph reduced to where its times meet, its NCCL kernels' ends cut: what
a worker sends so that the client solves the run's coupled replay without any rank's
events (docs/scale.md, "The what-if where the ranks are read").

The run's replay is one longest-path problem (``simulate``) whose only edges between ranks
are the ``peer`` edges into a matched NCCL kernel's end (``graph``). Cut every NCCL kernel's
end from its ``run`` edge (:func:`cut`): the rank's graph then takes nothing from outside
but those ends' times, and the pass over it visits only the nodes where times meet
(``visited._visited``: 1-3% of the nodes on the samples; the rest are a root's time plus
a constant, or a stream run's closed form). Those nodes, their edges and one node per
kernel start (from its root) are the rank's :class:`Reduced` graph (:func:`reduce`).

The client joins the ranks' reduced graphs with the ``run`` and ``peer`` edges of the
matching and solves them in one pass (:func:`solve`). On an acyclic graph the longest path
is unique, so each kernel end gets the time the run's replay gives it; each rank then
replays its own graph with those ends anchored at the solved times (:func:`anchored`), and
every node gets the run's replay's time. A cycle (a contradictory pairing, which the run's
replay breaks by forcing a kernel: ``simulate``) is not solved here: :func:`solve` says so.
All times int64 ns; node ids int32 where they fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.graph.events import ANCHOR, RUN, Graph, keep_edges
from profplug.analyzers.graph.longest_path import longest_path, longest_path_by_levels
from profplug.analyzers.graph.model import Model
from profplug.analyzers.whatif.visited import _visited, numbered


@dataclass
class Reduced:
    """A rank's graph reduced (module docstring): ``n`` nodes, edges ``src -> dst`` of
    weight ``w`` (ns), the source (time 0), and per cut kernel (in the order given) its
    end's node (no in-edge: the client adds them) and its start's node."""

    n: int
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray
    source: int
    ends: np.ndarray
    starts: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.src.nbytes + self.dst.nbytes + self.w.nbytes + self.ends.nbytes
                   + self.starts.nbytes)


def cut(g: Graph, ops: np.ndarray) -> Graph:
    """``g`` without the ``run`` edges into the ends of ``ops`` (local op ids), in place
    (``events.keep_edges``: a column at a time); returns ``g``."""
    return _cut(g, ops)


def _cut(g: Graph, ops: np.ndarray, at: np.ndarray | None = None) -> Graph:
    d = np.asarray(g.op_end(np.asarray(ops, dtype=np.int64)), dtype=np.int64)
    end = np.zeros(g.n_nodes, dtype=bool)
    end[d] = True
    keep = ~((g.kind == RUN) & end[g.dst])
    del end
    if at is None and keep.all():
        return g
    bounds = sorted({x for _, lo, hi in g.parts for x in (lo, hi)})
    kept_before = dict(zip(bounds, np.cumsum([np.count_nonzero(keep[a:b]) for a, b in
                                              zip([0, *bounds], bounds, strict=False)]).tolist(),
                           strict=True))
    parts = [(k, kept_before[lo], kept_before[hi]) for k, lo, hi in g.parts]
    n0 = int(np.count_nonzero(keep))
    extra = None if at is None else (np.full(d.size, g.source, dtype=g.src.dtype),
                                     d.astype(g.dst.dtype),
                                     np.asarray(at, dtype=np.int64),
                                     np.full(d.size, ANCHOR, dtype=np.int8))
    keep_edges(g, keep, extra)
    g.parts = parts + ([(ANCHOR, n0, n0 + d.size)] if at is not None and parts else [])
    return g


def anchored(g: Graph, ops: np.ndarray, at: np.ndarray) -> Graph:
    """:func:`cut` ``g``, each cut end anchored at its time ``at`` (ns): an ``anchor`` edge
    from the source, appended as one more block (the last); in place, returns ``g``."""
    return _cut(g, ops, at)


def reanchored(g: Graph, at: np.ndarray) -> Graph:
    """An :func:`anchored` graph (or its ``events.dropped_graph``) with its ends anchored at
    ``at`` instead, in place; returns ``g``."""
    k = int(np.asarray(at).size)
    lo = g.w.size - k
    if lo < 0 or not (g.kind[lo:] == ANCHOR).all():
        raise RuntimeError("what-if: re-anchoring a graph that is not anchored")
    g.w[lo:] = at
    return g


def reduce(g: Graph, m: Model, ops: np.ndarray, is_cut: bool = False) -> Reduced:
    """The :class:`Reduced` graph of one rank's model ``m`` and its graph ``g``, the ends
    of ``ops`` (its NCCL kernels, local op ids) cut (``is_cut``: ``g`` is, :func:`cut`)."""
    ops = np.asarray(ops, dtype=np.int64)
    cut_graph = g if is_cut else cut(g, ops)
    visited = _visited(cut_graph, m)
    n_visited = int(visited.nodes.size)
    src = [visited.number(visited.e_src)]
    dst = [visited.number(visited.e_dst)]
    w = [visited.e_w]
    # one node per kernel start: its time from its root (a stream run's: from two)
    start_node = n_visited + np.arange(ops.size)
    op_start = np.asarray(cut_graph.op_start(ops), dtype=np.int64)
    root, offset_ns = visited.root[op_start], visited.offset_ns[op_start]
    derived = visited.derived
    by_node = np.argsort(derived.node, kind="stable")  # a derived root: its run's entry
    run = numbered(derived.node[by_node], root)
    in_run = run >= 0
    run[in_run] = by_node[run[in_run]]
    plain = ~in_run
    src += [visited.number(root[plain]), visited.number(derived.h[run[in_run]]),
            visited.number(derived.s[run[in_run]])]
    dst += [start_node[plain], start_node[in_run], start_node[in_run]]
    w += [offset_ns[plain], offset_ns[in_run] + derived.a[run[in_run]],
          offset_ns[in_run] + derived.b[run[in_run]]]
    n = n_visited + int(ops.size)
    index_dtype = np.int32 if n < 2**31 else np.int64
    out_src: np.ndarray = np.concatenate(src).astype(index_dtype)
    if (out_src < 0).any():  # every root the pass starts from is a visited node
        raise RuntimeError("what-if: a reduced edge from a node the pass does not visit")
    return Reduced(n, out_src, np.concatenate(dst).astype(index_dtype), np.concatenate(w),
                   int(visited.number(np.array([cut_graph.source]))[0]),
                   visited.number(np.asarray(cut_graph.op_end(ops))).astype(index_dtype),
                   start_node.astype(index_dtype))


@dataclass
class Link:
    """Edges the client adds between reduced graphs: from kernel start ``(pos, i)`` (rank
    position, index among its cut kernels) to kernel end ``(to_pos, to_i)``, weight ns."""

    pos: np.ndarray
    i: np.ndarray
    to_pos: np.ndarray
    to_i: np.ndarray
    w: np.ndarray


# a joined graph of this many ranks and edges is solved a level at a time in numpy: it has
# as many levels as a rank's chain of waits is long, each with a node of every rank, and on
# lists it would hold a Python object per edge (several times its arrays' bytes); a narrow
# one (few ranks: each level a few numpy calls for a few nodes) on lists
LEVELS_MIN_RANKS = 16
LEVELS_MIN_EDGES = 200_000


def solve(parts: list[Reduced], links: Link) -> list[np.ndarray] | None:
    """Per rank position, the time (ns) of each cut kernel's end in the joined graph's
    longest path from the sources (at 0); None when the joined graph has a cycle."""
    base = np.cumsum([0] + [r.n for r in parts])
    n = int(base[-1])
    src = np.concatenate([r.src.astype(np.int64) + b for r, b in zip(parts, base, strict=False)]
                         + [np.zeros(0, np.int64)])
    dst = np.concatenate([r.dst.astype(np.int64) + b for r, b in zip(parts, base, strict=False)]
                         + [np.zeros(0, np.int64)])
    w = np.concatenate([r.w for r in parts] + [np.zeros(0, np.int64)])
    k_off = np.cumsum([0] + [r.starts.size for r in parts])  # per position, its first kernel
    starts = np.concatenate([r.starts.astype(np.int64) + b for r, b in zip(parts, base,
                                                                            strict=False)])
    ends = np.concatenate([r.ends.astype(np.int64) + b for r, b in zip(parts, base,
                                                                        strict=False)])
    src = np.concatenate([src, starts[k_off[links.pos] + links.i]])
    dst = np.concatenate([dst, ends[k_off[links.to_pos] + links.to_i]])
    w = np.concatenate([w, links.w])
    wide = len(parts) >= LEVELS_MIN_RANKS and src.size >= LEVELS_MIN_EDGES
    longest = longest_path_by_levels if wide else longest_path
    t = longest(n, src, dst, w, [int(r.source + b) for r, b in zip(parts, base, strict=False)])
    if t is None:
        return None
    te = t[ends]
    return [te[k_off[p]:k_off[p + 1]] for p in range(len(parts))]
