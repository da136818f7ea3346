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
  peeled (``longest_path.acyclic``: Kahn, one level per pass; the last few hundred in one
  Kahn's order on lists); windows that span more than a quarter of the run, or too deep to
  peel within the graph's edges, are left to the pass.

Anything unexpected (a node off its equations, a cycle, a deep window): ``None``, and the
replay takes the pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload

import numpy as np
from profplug.analyzers.graph.events import Graph
from profplug.analyzers.graph.longest_path import MIN_NS, acyclic, first_in_edges

_CHUNK = 1 << 16  # edges per block of the window test and the equations (~0.5 MB a temporary)
SMALL_PEEL = 512  # from this many edges left, Kahn's order on lists (``longest_path.acyclic``)
# the windows' peel looks at no more than this many times the graph's edges in all, then
# leaves the graph to the pass: windows that hold much of a deep graph (ranks whose clocks
# drift apart open wide ones) would take a level per node of its longest chain, where the
# pass's fold crosses a chain in a few passes over the edges
MAX_WORK = 1
# windows that span more than this share of the recorded run are left to the pass at once:
# they hold a like share of its nodes (all of a chain's in a deep graph), more than the peel
# takes within ``MAX_WORK``
MAX_COVER = 0.25


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
    body = t[:g.source]  # (the source is the last node, at 0)
    on = body > MIN_NS
    span = int(body.max(initial=MIN_NS, where=on)) - int(body.min(initial=-MIN_NS, where=on))
    if int((w_hi - w_lo).sum()) > MAX_COVER * span:
        return False
    # each node's window (-1: in none), once per node; an edge is inside when both its ends
    # are in one window
    k = np.searchsorted(w_lo, t, side="right") - 1
    wid = np.where((k >= 0) & (t <= w_hi[np.maximum(k, 0)]), k, -1)
    del k
    ins: list[np.ndarray] = []
    for first in range(0, g.src.size, _CHUNK):  # a block of edges at a time: few temporaries
        ks = wid[g.src[first:first + _CHUNK]]
        ins.append(first + np.nonzero((ks >= 0) & (ks == wid[g.dst[first:first + _CHUNK]]))[0])
    e = np.concatenate(ins) if ins else np.zeros(0, dtype=np.int64)
    del ins
    return _peel(g, g.src[e], g.dst[e])


def _peel(g: Graph, src: np.ndarray, dst: np.ndarray) -> bool:
    """No cycle among the edges ``src -> dst`` (``longest_path.acyclic``); a window too deep
    to peel within ``MAX_WORK`` times the graph's edges is left to the pass."""
    return bool(acyclic(src, dst, g.n_nodes, MAX_WORK * g.src.size, SMALL_PEEL))


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
        first = tight[first_in_edges(g.dst[tight])]
        bind = np.full(n, -1, dtype=np.int64)  # (every node with an in-edge has a tight one)
        bind[g.dst[first]] = first
        return bind

    return (t, binding) if lazy else (t, binding())
