"""The replay as recorded without the pass: the recorded times, checked to be its answer.

The model's rules make the recorded run a fixed point of the replay (``model``): every
node's recorded time is the latest of its predecessors' recorded times plus the edge
weights. On an acyclic graph the longest path is the one solution of those equations, so
when the recorded times satisfy them and the graph has no cycle, they *are* the replay, and
the pass (``simulate.longest_path``) is not needed. Both checks are vectorized:

- the equations: no edge's source time plus weight above its destination's time, and every
  node with an in-edge on one (the latest in-edge equal to the time);
- no cycle: along an edge whose source is earlier than its destination the time rises, so
  a cycle needs an edge that does not rise (a zero-length op or gap, a ``peer`` edge across
  ranks' clocks), and it lies within the time span that such edges cover (merged
  [destination, source] windows: to come back down to every time it passed, the cycle
  crosses each with a non-rising edge). Only the edges with both ends in one window are
  peeled (Kahn, one level per pass; the last few hundred in one Kahn's order on lists);
  windows too deep to peel within a few times the graph's edges are left to the pass.

Anything unexpected (a node off its equations, a cycle, a deep window): ``None``, and the
replay takes the pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload

import numpy as np
from profplug.analyzers.graph.events import Graph

MIN_NS = -(2**62)
_CHUNK = 1 << 16  # edges per block of the window test and the equations (~0.5 MB a temporary)
SMALL_PEEL = 512  # from this many edges left, Kahn's order on lists (_acyclic_lists)
MAX_WORK = 4  # peel at most this many times the graph's edges in all, then leave it to the pass


def _acyclic_within(g: Graph, t: np.ndarray, ts: np.ndarray, td: np.ndarray,
                    flat: np.ndarray) -> bool:
    """No cycle among the nodes in the time windows of the non-rising edges ``flat``
    (``t``: per node its time; ``ts``/``td``: per edge of ``flat``, its source's and
    destination's)."""
    lo, hi = td, ts
    if (lo == hi).all():  # every window a single instant (the usual: zero gaps): the
        src, dst = g.src[flat], g.dst[flat]  # edges inside are those flat edges themselves
        return _peel(g, src, dst)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    starts = np.concatenate(([True], lo[1:] > hi[:-1])).nonzero()[0]  # merged: overlap or touch
    w_lo, w_hi = lo[starts], hi[np.concatenate((starts[1:] - 1, [lo.size - 1]))]
    # each node's window (-1: in none), once per node; an edge is inside when both its ends
    # are in one window
    k = np.searchsorted(w_lo, t, side="right") - 1
    wid = np.where((k >= 0) & (t <= w_hi[np.maximum(k, 0)]), k, -1)
    del k
    ins: list[np.ndarray] = []
    for lo in range(0, g.src.size, _CHUNK):  # a block of edges at a time: few temporaries
        ks = wid[g.src[lo:lo + _CHUNK]]
        ins.append(lo + np.nonzero((ks >= 0) & (ks == wid[g.dst[lo:lo + _CHUNK]]))[0])
    e = np.concatenate(ins) if ins else np.zeros(0, dtype=np.int64)
    del ins
    return _peel(g, g.src[e], g.dst[e])


def _peel(g: Graph, src: np.ndarray, dst: np.ndarray) -> bool:
    """No cycle among the edges ``src -> dst``: peeled level by level (Kahn) within a few
    times the graph's edges; once few edges are left, in one Kahn's order on plain lists."""
    budget = MAX_WORK * g.src.size
    while budget > 0:
        if src.size == 0:
            return True
        if src.size <= SMALL_PEEL:  # a long chain would take a few numpy calls per level
            return _acyclic_lists(src, dst)
        budget -= src.size
        has_in = np.zeros(g.n_nodes, dtype=bool)
        has_in[dst] = True
        keep = has_in[src]  # edges out of a node with no predecessor left are peeled
        if keep.all():
            return False  # nothing to peel: a cycle
        src, dst = src[keep], dst[keep]
    return False


def _acyclic_lists(src: np.ndarray, dst: np.ndarray) -> bool:
    """No cycle among the edges ``src -> dst``: every node taken in Kahn's order (one visit
    per edge, where a level-by-level peel of a long chain costs a few numpy calls a level)."""
    nodes, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    k = nodes.size
    s, d = inv[:src.size], inv[src.size:]
    order = np.argsort(s, kind="stable")
    ptr = np.searchsorted(s[order], np.arange(k + 1)).tolist()
    out = d[order].tolist()
    indeg = np.bincount(d, minlength=k).tolist()
    stack = [v for v in range(k) if not indeg[v]]
    seen = 0
    while stack:
        u = stack.pop()
        seen += 1
        for j in range(ptr[u], ptr[u + 1]):
            v = out[j]
            indeg[v] -= 1
            if not indeg[v]:
                stack.append(v)
    return seen == k


@overload
def recorded_fixed_point(g: Graph, rec: np.ndarray, lazy: Literal[False] = False
                         ) -> tuple[np.ndarray, np.ndarray] | None: ...


@overload
def recorded_fixed_point(g: Graph, rec: np.ndarray, lazy: Literal[True]
                         ) -> tuple[np.ndarray, Callable[[], np.ndarray]] | None: ...


def recorded_fixed_point(g: Graph, rec: np.ndarray, lazy: bool = False
                         ) -> tuple[np.ndarray, Any] | None:
    """(time, binding edge) per node when the recorded times ``rec`` (per node, the source
    last at 0) are the replay of ``g`` (see the module docstring), else None; ``lazy``: the
    binding edges as a function that finds them (on need)."""
    n = g.n_nodes
    has_in = np.zeros(n, dtype=bool)
    has_in[g.dst] = True
    t = np.where(has_in, rec, MIN_NS)
    t[g.source] = 0
    if has_in[g.source]:
        return None
    # a block of edges at a time (few temporaries: a worker's peak, docs/scale.md)
    on = np.zeros(n, dtype=bool)
    flats: list[np.ndarray] = []
    for lo in range(0, g.src.size, _CHUNK):
        ts, td = t[g.src[lo:lo + _CHUNK]], t[g.dst[lo:lo + _CHUNK]]
        val = ts + g.w[lo:lo + _CHUNK]
        # every node with an in-edge on its equation: no in-edge above its time, and one on
        # it (the same test as the latest in-edge equal to the time, without an unbuffered
        # max)
        if (val > td).any():
            return None
        on[g.dst[lo:lo + _CHUNK][val == td]] = True
        flats.append(lo + np.flatnonzero(ts >= td))
    if not (on == has_in).all():
        return None
    del on
    flat = np.concatenate(flats) if flats else np.zeros(0, dtype=np.int64)
    del flats
    if flat.size and not _acyclic_within(g, t, t[g.src[flat]], t[g.dst[flat]], flat):
        return None

    def binding() -> np.ndarray:
        tight = np.nonzero(t[g.src] + g.w == t[g.dst])[0]  # the lowest-numbered tight edge binds
        bind = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(bind, g.dst[tight], tight)
        return np.where(has_in, bind, -1)

    return (t, binding) if lazy else (t, binding())
