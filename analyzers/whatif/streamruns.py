"""Runs of ops on one stream launched from one stretch of host work, solved in closed form
(all times int64 ns), so that the longest-path pass (``simulate``) visits only the nodes
where times from different sources meet.

An op whose start has exactly two predecessors, its launch (a host call's start) and the
previous op's end on its stream, and whose end has one (its duration: not a matched NCCL
kernel), starts at ``max(H + lam, e_prev + gap)``, where ``H`` is the host node its
launching call's start folds onto (``visited._fold``: the last point where the host
waited). Along a run of such ops that share ``H``, after a *head* op (any other op) whose end
is ``S`` plus a constant, the recurrence ``e_p = max(H + lam_p + d_p, e_(p-1) + gap_p + d_p)``
unrolls to

    start_p = max(S + B_p, H + A_p),   D_p = sum_(q<=p) (gap_q + d_q),
    B_p = sigma + D_p - d_p,           A_p = D_p - d_p + max_(q<=p) (lam_q + d_q - D_q),

with ``sigma`` the head's end's offset from ``S``: one prefix sum and one prefix max per run,
all runs at once (in stream order, one cumulative sum and max; else pointer doubling along
the stream: ``longest_path.jump``). Max-plus sums are exact in integers: the times are those
the node-by-node pass gives. An edge out of such a *derived* op becomes
two edges, one from ``S`` and one from ``H`` (``max(a, b) + w = max(a + w, b + w)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.graph.events import LAUNCH, RUN, STREAM, Graph
from profplug.analyzers.graph.longest_path import jump


@dataclass
class Runs:
    """The derived op starts (node ids), and per one: ``h``/``s`` (root nodes) and ``a``/``b``
    (ns): its time is ``max(t[h] + a, t[s] + b)``."""

    node: np.ndarray
    h: np.ndarray
    s: np.ndarray
    a: np.ndarray
    b: np.ndarray


def no_runs() -> Runs:
    """No derived op: every node solved by the pass."""
    z = np.zeros(0, dtype=np.int64)
    return Runs(z, z, z, z, z)


def _edge_of(g: Graph, kind: int, base: int, n: int) -> np.ndarray:
    """Per op, its in-edge of ``kind`` into the node ``base + op`` (-1 none; the last);
    edge ids int32 where they fit (a worker's peak: docs/scale.md)."""
    out = np.full(n, -1, dtype=np.int32 if g.dst.size < 2**31 else np.int64)
    e = g.edges(kind)
    out[g.dst[e] - base] = np.arange(e.start, e.stop) if isinstance(e, slice) else e
    return out


def _at(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``x[e]`` where ``e >= 0``, else 0 (one temporary)."""
    picked: np.ndarray = x[np.maximum(e, 0)]
    return picked


def _listed(p: np.ndarray) -> np.ndarray:
    """Whether a link points to an element (-1: a list's first has none)."""
    return p >= 0


def _second(_a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b


def stream_runs(g: Graph, root: np.ndarray, off: np.ndarray,
                order: np.ndarray | None = None, indeg: np.ndarray | None = None) -> Runs:
    """The derived ops of ``g`` (see the module docstring), given the single-predecessor fold
    (``root``, ``off``) and the ops in stream order (``Model.o_order``; without it, along
    the stream edges); none where the graph does not have the expected shape. ``indeg``:
    each node's number of in-edges, when the caller has it."""
    n_a, n_o = g.n_a, g.n_o
    o_s0, o_e0 = 2 * n_a, 2 * n_a + n_o
    none = no_runs()
    if n_o == 0:
        return none
    indeg = np.bincount(g.dst, minlength=g.n_nodes) if indeg is None else indeg
    # per op arrays, each freed once read (a worker's peak: docs/scale.md)
    run = _edge_of(g, RUN, o_e0, n_o)
    single_end = indeg[o_e0:o_e0 + n_o] == 1
    cand = (indeg[o_s0:o_s0 + n_o] == 2) & single_end & (run >= 0)
    st = _edge_of(g, STREAM, o_s0, n_o)
    cand &= st >= 0
    prev = _at(g.src, st)  # node ids (int32 where they fit), a copy
    prev -= o_e0
    prev[st < 0] = -1
    cand &= single_end[np.maximum(prev, 0)]
    del single_end
    c = _at(g.w, st)  # the queue gap, plus the duration below
    del st
    lau = _edge_of(g, LAUNCH, o_s0, n_o)
    cand &= lau >= 0
    lsrc = _at(g.src, lau)
    h = root[lsrc]
    lam = _at(g.w, lau)
    lam += off[lsrc]
    del lau, lsrc
    pm = np.maximum(prev, 0)
    der = cand & (~cand[pm] | (h[pm] == h))  # a derived predecessor shares the host root
    del cand, pm
    idx = np.nonzero(der)[0]
    if idx.size == 0:
        return none
    if order is not None and order.size == n_o:  # stream order: each derived op's prev first
        at = np.empty(n_o, dtype=np.int64)
        at[order] = np.arange(n_o)
        if not (order[np.maximum(at[idx] - 1, 0)] == prev[idx]).all():  # (same sizes)
            order = None
        del at
    cols = {"run": run, "c": c, "lam": lam, "h": h, "prev": prev}
    del run, c, lam, h, prev  # the callee lets each go once read (a worker's peak)
    if order is not None and order.size == n_o:
        del idx  # found again, in stream order
        idx, head, big_d, mx, di, hn = _derived_in_order(g, order, der, cols, n_o)
    else:
        idx, head, big_d, mx, di, hn = _derived_linked(g, idx, der, cols)
    return _runs(g, root, off, o_s0, o_e0, (idx, head, big_d, mx, di, hn))


def _runs(g: Graph, root: np.ndarray, off: np.ndarray, o_s0: int, o_e0: int,
          found: Derived) -> Runs:
    """The runs of the derived ops ``found``, each solved from its head's start node (its
    root and offset); none when a head's root or a host root is itself derived (not the
    expected shape: solved by node)."""
    idx, head, big_d, mx, di, hn = found
    e_head = o_e0 + head
    s_node, sigma = root[e_head], off[e_head]
    derived = np.zeros(g.n_nodes, dtype=bool)
    derived[o_s0 + idx] = True
    if derived[s_node].any() or derived[hn].any():
        return no_runs()
    del derived
    big_d -= di  # D - d: the offsets of both terms
    mx += big_d
    big_d += sigma
    return Runs(o_s0 + idx, hn, s_node, mx, big_d)


Derived = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _derived_in_order(g: Graph, order: np.ndarray, der: np.ndarray,
                      cols: dict[str, np.ndarray], n_o: int) -> Derived:
    """The derived ops in stream order (``idx``), their runs' heads, ``D`` and prefix max,
    durations and host roots, from the per-op columns of ``cols`` (``run``: run edge,
    ``c``: queue gap, ``lam``: launch time, ``h``: host root), each taken in that order and
    let go before the scans."""
    del cols["prev"]
    idx, head, rid, at_first = _in_order(order, der)
    r_i = cols.pop("run")[idx]
    di = _at(g.w, r_i)
    di[r_i < 0] = 0
    del r_i
    cv = cols.pop("c")[idx]
    cv += di
    z = cols.pop("lam")[idx]
    z += di  # lam + d: the run's prefix max's terms
    hn = cols.pop("h")[idx]
    big_d, mx = _scans_in_order(cv, z, rid, at_first, idx, n_o)
    return idx, head, big_d, mx, di, hn


def _derived_linked(g: Graph, idx: np.ndarray, der: np.ndarray,
                    cols: dict[str, np.ndarray]) -> Derived:
    """As :func:`_derived_in_order`, the runs followed along each op's stream predecessor
    (``prev``) when the stream order is not known."""
    run = cols.pop("run")
    d = _at(g.w, run)
    d[run < 0] = 0
    del run
    c, lam = cols.pop("c"), cols.pop("lam")
    c += d
    lam += d  # lam + d: the run's prefix max's terms
    idx, head, big_d, mx = _runs_linked(idx, der, cols.pop("prev"), c, lam)
    del c, lam
    di, hn = d[idx], cols.pop("h")[idx]
    return idx, head, big_d, mx, di, hn


def _runs_linked(idx: np.ndarray, der: np.ndarray, prev: np.ndarray, c: np.ndarray,
                 y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per derived op (``idx``): its run's head op, ``D`` (prefix sum of ``c`` over the run)
    and the prefix max of ``y - D``; along the ``prev`` links (``longest_path.jump``)."""
    n_o = der.size
    link = np.full(n_o, -1, dtype=np.int64)  # the previous op of the run, -1 at its first
    link[idx] = np.where(der[prev[idx]], prev[idx], -1)
    live = np.flatnonzero(link >= 0)
    big_d = np.zeros(n_o, dtype=np.int64)
    big_d[idx] = c[idx]
    head = np.where(der, prev, np.arange(n_o))  # its first's prev, once jumped
    jump(link.copy(), live, _listed, [(big_d, np.add), (head, _second)])
    mx = np.zeros(n_o, dtype=np.int64)
    mx[idx] = y[idx] - big_d[idx]
    jump(link, live, _listed, [(mx, np.maximum)])
    return idx, head[idx], big_d[idx], mx[idx]


def _in_order(order: np.ndarray, der: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The derived ops (``der``) in stream order (``order``), each one's run's head op (the
    op before the run's first), each one's run number and the runs' first positions."""
    pos = np.flatnonzero(der[order])
    idx = order[pos]
    first = np.empty(pos.size, dtype=bool)
    first[:1] = True
    first[1:] = pos[1:] != pos[:-1] + 1
    rid = np.cumsum(first, dtype=np.int64)
    rid -= 1
    at_first = np.flatnonzero(first)
    head = order[pos[at_first] - 1][rid]  # the op before the run's first
    return idx, head, rid, at_first


def _scans_in_order(cv: np.ndarray, z: np.ndarray, rid: np.ndarray, at_first: np.ndarray,
                    idx: np.ndarray, n_o: int) -> tuple[np.ndarray, np.ndarray]:
    """``D`` (the prefix sum of ``cv`` over each run) and the prefix max of ``z - D``, per
    derived op in stream order (``_in_order``); ``z`` and ``rid`` are written in place."""
    # (in place where it can: a worker's peak, docs/scale.md)
    big_d = np.cumsum(cv)
    big_d -= (big_d[at_first] - cv[at_first])[rid]
    del cv
    z -= big_d
    # each run from its own lowest value (times since the epoch: far apart across runs,
    # close within one), so that the offsets below stay small
    lo = np.minimum.reduceat(z, at_first)[rid]
    z -= lo
    span = int(z.max()) + 1
    if int(rid[-1]) * span >= 2 ** 62 - span:  # the offsets would overflow: by links
        link = np.full(n_o, -1, dtype=np.int64)
        nf = np.ones(idx.size, dtype=bool)
        nf[at_first] = False
        link[idx[nf]] = idx[np.nonzero(nf)[0] - 1]
        zz = np.zeros(n_o, dtype=np.int64)
        zz[idx] = z
        jump(link, np.flatnonzero(link >= 0), _listed, [(zz, np.maximum)])
        return big_d, zz[idx] + lo
    shift = rid  # (written: the caller's run numbers are spent)
    shift *= span  # each run above every earlier one: a global cummax stays in its run
    z += shift
    np.maximum.accumulate(z, out=z)
    z -= shift
    del shift
    z += lo
    return big_d, z
