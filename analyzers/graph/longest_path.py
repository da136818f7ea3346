"""The what-if's one longest-path solver: over a graph of ``n`` nodes and edges ``src -> dst``
of weight ``w``, each node's time is the latest of (its predecessor's time + the edge's
weight) over its in-edges, the sources at 0 (all times int64 ns; ``MIN_NS``: no path
reaches it). The replay (``simulate``, ``fixedpoint``, ``visited``, ``streamruns``), the joined
reduced graphs (``joined_replay``) and the critical path (``graph.pathgraph``) all solve with it,
each in the shape it holds the problem:

- :class:`Kahn`: Kahn's order on Python lists, one visit per edge (a long chain of waits
  costs no more than a wide graph); a pass that stops with nodes left (a cycle) can be
  released by its caller and run again (``simulate``'s cycle breaking).
  :func:`longest_path`: its times, None on a cycle;
- :func:`longest_path_by_levels`: the same times a level at a time in numpy: every node
  whose predecessors are all timed relaxes its out-edges at once (a wide graph: few levels,
  many nodes each);
- :func:`acyclic`: whether Kahn's order takes every node (the fixed-point check: no pass
  needed when the recorded times solve an acyclic graph);
- :func:`jump`: chains of single predecessors in closed form by pointer jumping: sums and
  maxes along a chain (``visited``, ``streamruns``), a chain's first node (``pathgraph``);
- :func:`first_in_edges`: per node the in-edge that comes first by given keys, so that the
  edge that gives a node its time (its *binding* edge) is chosen by one rule of ties.

On an acyclic graph the times are unique: every order of the nodes that waits for their
predecessors gives the same ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

MIN_NS = -(2**62)  # a time no path reaches (room below and above: sums stay in int64)


class Kahn:
    """Kahn's order over nodes ``0..n-1`` on Python lists: ``t`` (per node its time so far:
    0 at ``sources``, else ``MIN_NS``), ``indeg`` (per node its in-edges not yet relaxed),
    ``ready`` (the nodes whose in-edges all are), ``w`` (per edge in ``order``, the edges
    sorted by source, its weight). A caller that breaks a cycle edits these between runs."""

    def __init__(self, n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 sources: Iterable[int] = ()) -> None:
        self.order = np.argsort(src, kind="stable")
        self._ptr = np.searchsorted(src[self.order], np.arange(n + 1)).tolist()
        self._dst = dst[self.order].tolist()
        self.w = w[self.order].tolist()
        indeg = np.bincount(dst, minlength=n)
        self.indeg = indeg.tolist()
        self.t = [MIN_NS] * n
        for s in sources:
            self.t[s] = 0
        self.ready = np.flatnonzero(indeg == 0).tolist()
        self.done = 0

    def run(self) -> int:
        """Relax the ready nodes' out-edges until none is ready; the nodes done so far (``n``:
        all, no cycle)."""
        ptr, dst, w, t, indeg, ready = self._ptr, self._dst, self.w, self.t, self.indeg, \
            self.ready
        done = self.done
        while ready:
            u = ready.pop()
            done += 1
            tu = t[u]
            for k in range(ptr[u], ptr[u + 1]):
                v = dst[k]
                c = tu + w[k]
                if c > t[v]:
                    t[v] = c
                indeg[v] -= 1
                if not indeg[v]:
                    ready.append(v)
        self.done = done
        return done

    def cut(self, edges: np.ndarray) -> None:
        """The edges ``edges`` (ids as given) give nothing: their later relaxation changes no
        time (they are still waited for: ``indeg`` is the caller's)."""
        for k in np.flatnonzero(np.isin(self.order, edges)).tolist():
            self.w[k] = MIN_NS


def longest_path(n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 sources: Iterable[int]) -> np.ndarray | None:
    """Per node its time (:class:`Kahn`'s order on lists); None when a node is left on a
    cycle."""
    k = Kahn(n, src, dst, w, sources)
    return np.array(k.t, dtype=np.int64) if k.run() == n else None


def longest_path_by_levels(n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                           sources: Iterable[int]) -> np.ndarray | None:
    """:func:`longest_path` a level at a time: every node whose predecessors are all timed
    relaxes its out-edges in one numpy pass (``np.maximum.at``: the max over a node's
    in-edges does not depend on their order); no Python object per edge. None when a node
    is left on a cycle."""
    order = np.argsort(src, kind="stable")
    ptr = np.searchsorted(src[order], np.arange(n + 1))
    s_dst, s_w = dst[order], w[order]
    del order
    indeg = np.bincount(dst, minlength=n)
    t = np.full(n, MIN_NS, dtype=np.int64)
    t[np.fromiter(sources, dtype=np.int64)] = 0
    front = np.flatnonzero(indeg == 0)
    done = 0
    while front.size:
        done += front.size
        lo = ptr[front]
        cnt = ptr[front + 1] - lo
        total = int(cnt.sum())
        if not total:
            break
        e = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(total)  # their edges
        d = s_dst[e]
        np.maximum.at(t, d, np.repeat(t[front], cnt) + s_w[e])
        np.subtract.at(indeg, d, 1)
        ready = np.unique(d)
        front = ready[indeg[ready] == 0]
    return t if done == n else None


def acyclic(src: np.ndarray, dst: np.ndarray, n: int, budget: int = 0,
            on_lists: int = 512) -> bool | None:
    """Whether the edges ``src -> dst`` (node ids below ``n``) hold no cycle: Kahn's order a
    level at a time in numpy (the edges out of nodes with no in-edge left peeled, no sort:
    a level costs one look at the edges left) while more than ``on_lists`` edges are left,
    then on lists (one visit per edge, where a long chain costs a numpy call per level);
    None when the next level would take the edges looked at past ``budget`` (too deep)."""
    while src.size > on_lists:
        if src.size > budget:
            return None
        budget -= src.size
        has_in = np.zeros(n, dtype=bool)
        has_in[dst] = True
        keep = has_in[src]
        if keep.all():
            return False  # nothing to peel: a cycle
        src, dst = src[keep], dst[keep]
    nodes, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    k = Kahn(nodes.size, inv[:src.size], inv[src.size:], np.zeros(src.size, dtype=np.int64))
    return k.run() == nodes.size


Combine = Callable[[np.ndarray, np.ndarray], np.ndarray]


def jump(ptr: np.ndarray, live: np.ndarray, more: Callable[[np.ndarray], np.ndarray],
         cols: Sequence[tuple[np.ndarray, Combine]] = (), rounds: int = 64) -> np.ndarray:
    """Pointer jumping (Wyllie), in place: each node of ``live`` takes its target's
    (``ptr``) columns into its own (``x[v] = op(x[v], x[target])``, each ``(x, op)`` of
    ``cols``) and its target's target as its own, while ``more(target)`` holds: along a
    chain of single predecessors, the sum (or max) of its values and its first node, in
    log2(the chain's length) rounds. At most ``rounds`` (a chain that loops never ends);
    returns the nodes still live after them."""
    for _ in range(rounds):
        if not live.size:
            break
        p = ptr[live]
        for x, op in cols:
            x[live] = op(x[live], x[p])
        ptr[live] = ptr[p]
        live = live[more(ptr[live])]
    return live


def first_in_edges(dst: np.ndarray, keys: Sequence[np.ndarray] = ()) -> np.ndarray:
    """Per node with an in-edge, in node order, the position (in ``dst``) of the in-edge
    that comes first by ``keys`` (``np.lexsort``'s: the last key first, each ascending),
    ties by position: the binding edge, by the caller's rule of ties."""
    order = np.lexsort((*keys, dst)) if keys else np.argsort(dst, kind="stable")
    d = dst[order]
    first = np.ones(d.size, dtype=bool)
    first[1:] = d[1:] != d[:-1]
    return order[first]
