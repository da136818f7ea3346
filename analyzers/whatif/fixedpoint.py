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


def _acyclic_within(g: Graph, t: np.ndarray, flat_src_ns: np.ndarray, flat_dst_ns: np.ndarray,
                    flat: np.ndarray) -> bool:
    """No cycle among the nodes in the time windows of the non-rising edges ``flat``
    (``t``: per node its time, ns; ``flat_src_ns``/``flat_dst_ns``: per edge of ``flat``,
    its source's and destination's)."""
    if (flat_dst_ns == flat_src_ns).all():  # every window a single instant (the usual: zero
        # gaps): the edges inside are those flat edges themselves
        return _peel(g, g.src[flat], g.dst[flat])
    window_lo_ns, window_hi_ns = _merged_windows(flat_dst_ns, flat_src_ns)
    body_ns = t[:g.source]  # (the source is the last node, at 0)
    timed = body_ns > MIN_NS
    span_ns = (int(body_ns.max(initial=MIN_NS, where=timed))
               - int(body_ns.min(initial=-MIN_NS, where=timed)))
    if int((window_hi_ns - window_lo_ns).sum()) > MAX_COVER * span_ns:
        return False
    # each node's window (-1: in none), once per node; an edge is inside when both its ends
    # are in one window
    k = np.searchsorted(window_lo_ns, t, side="right") - 1
    window = np.where((k >= 0) & (t <= window_hi_ns[np.maximum(k, 0)]), k, -1)
    del k
    inside: list[np.ndarray] = []
    for first in range(0, g.src.size, _CHUNK):  # a block of edges at a time: few temporaries
        src_window = window[g.src[first:first + _CHUNK]]
        inside.append(first + np.nonzero(
            (src_window >= 0) & (src_window == window[g.dst[first:first + _CHUNK]]))[0])
    edges = np.concatenate(inside) if inside else np.zeros(0, dtype=np.int64)
    del inside
    return _peel(g, g.src[edges], g.dst[edges])


def _merged_windows(lo_ns: np.ndarray, hi_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The windows ``[lo_ns, hi_ns]`` merged where they overlap or touch, by start."""
    order = np.argsort(lo_ns, kind="stable")
    lo_ns, hi_ns = lo_ns[order], np.maximum.accumulate(hi_ns[order])
    starts = np.concatenate(([True], lo_ns[1:] > hi_ns[:-1])).nonzero()[0]
    return lo_ns[starts], hi_ns[np.concatenate((starts[1:] - 1, [lo_ns.size - 1]))]


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
    flat = _flat_edges_if_on_equations(g, t, has_in)
    if flat is None:
        return None
    if flat.size and not _acyclic_within(g, t, t[g.src[flat]], t[g.dst[flat]], flat):
        return None

    def binding() -> np.ndarray:
        tight = np.nonzero(t[g.src] + g.w == t[g.dst])[0]  # the lowest-numbered tight edge binds
        first = tight[first_in_edges(g.dst[tight])]
        bind = np.full(n, -1, dtype=np.int64)  # (every node with an in-edge has a tight one)
        bind[g.dst[first]] = first
        return bind

    return (t, binding) if lazy else (t, binding())


def _flat_edges_if_on_equations(g: Graph, t: np.ndarray, has_in: np.ndarray
                                ) -> np.ndarray | None:
    """The edges that do not rise (source time >= destination time) when every node with an
    in-edge is on its equation (no in-edge above its time ``t``, and one on it: the same
    test as the latest in-edge equal to the time, without an unbuffered max); else None. A
    block of edges at a time (few temporaries: a worker's peak, docs/scale.md)."""
    on_equation = np.zeros(g.n_nodes, dtype=bool)
    flats: list[np.ndarray] = []
    for first in range(0, g.src.size, _CHUNK):
        src_ns, dst_ns = t[g.src[first:first + _CHUNK]], t[g.dst[first:first + _CHUNK]]
        via_ns = src_ns + g.w[first:first + _CHUNK]
        if (via_ns > dst_ns).any():
            return None
        on_equation[g.dst[first:first + _CHUNK][via_ns == dst_ns]] = True
        flats.append(first + np.flatnonzero(src_ns >= dst_ns))
    if not (on_equation == has_in).all():
        return None
    return np.concatenate(flats) if flats else np.zeros(0, dtype=np.int64)
