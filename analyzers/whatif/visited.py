"""What a longest-path pass over a replay graph visits (``simulate``): the nodes with one
predecessor folded onto the first node where times meet (:func:`_fold`, the host chains by a
prefix sum), the runs of ops solved in closed form (``streamruns``), and the rest, the
visited nodes and their edges (:func:`_visited`). All times int64 ns; node ids as the
graph's (``events.node_ids``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.graph.events import Graph
from profplug.analyzers.graph.longest_path import jump
from profplug.analyzers.graph.model import Model
from profplug.analyzers.whatif.streamruns import Runs, no_runs, stream_runs


def _host_fold(g: Graph, threads: list[np.ndarray], single: np.ndarray, src1: np.ndarray,
               root: np.ndarray, off: np.ndarray) -> None:
    """Fold the host threads' chains in one prefix sum: along a thread (start, end, next
    start, ...) every node whose one predecessor is the node before it continues its
    segment; a segment starts at a node that waits (two or more predecessors: its own root)
    or at the thread's first start (its root: the source). ``root``/``off`` are updated in
    place for the nodes of the threads; a thread a piece at a time (``_CHUNK`` nodes: few
    temporaries), the open segment carried from one piece to the next."""
    for calls in threads:
        last, cs_end, adj_open, root_open = -1, 0, 0, 0  # nothing open at a thread's start
        for lo in range(0, calls.size, _CHUNK // 2):
            c = calls[lo:lo + _CHUNK // 2]
            seq = np.empty(2 * c.size, dtype=root.dtype)
            seq[0::2], seq[1::2] = c, g.n_a + c  # start, end, next start, ...
            sg, rg = single[seq], src1[seq]  # read before written (src1 may be root)
            cont = sg.copy()
            cont[1:] &= rg[1:] == seq[:-1]  # the one predecessor is the node before
            cont[0] &= bool(rg[0] == last)  # (a thread's first start: never)
            new = ~cont
            head = np.flatnonzero(new)  # the segments' first nodes (few: the waits)
            sh = sg[head]
            og = off[seq]
            base = np.where(sh, og[head], 0)  # a head's own one step (from the source)
            og[new] = 0  # the one in-edge's weight (root/off: one step so far)
            cs = np.cumsum(og, out=og)
            cs += cs_end
            # per segment (the open one from the piece before first) its offset and root
            adj = np.concatenate(([adj_open], cs[head] - base))
            roots = np.concatenate(([root_open], np.where(sh, rg[head], seq[head])))
            seg = np.cumsum(new, dtype=root.dtype)  # 0: the open segment
            off[seq] = cs - adj[seg]
            root[seq] = roots[seg]
            last, cs_end = int(seq[-1]), int(cs[-1])
            adj_open, root_open = int(adj[-1]), int(roots[-1])


_CHUNK = 1 << 16  # edges per piece where a pass over every edge would make big temporaries


def _fold(g: Graph, threads: list[np.ndarray] | None = None, indeg: np.ndarray | None = None,
          edges: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(root, offset) per node, and the single-predecessor nodes' in-edges (edge ids, for
    the binding edges; None unless ``edges``): a node with one predecessor (a call that
    waits for nothing, the next call's start, an op that is not a matched NCCL kernel, ...)
    is that predecessor's time plus a constant; chains of them fold onto their first node
    with two or more predecessors, so the pass visits only the nodes where times meet. The
    host threads' chains (``threads``: top-level calls in order) fold in one prefix sum, the
    rest by pointer jumping (``longest_path.jump``). Unfolded nodes are their own root (offset 0). ``indeg``: each
    node's number of in-edges, when the caller has it. ``root`` has the graph's node id
    dtype (``events.node_ids``)."""
    n = g.n_nodes
    single = (np.bincount(g.dst, minlength=n) if indeg is None else indeg) == 1
    root = np.arange(n, dtype=g.dst.dtype)
    off = np.zeros(n, dtype=np.int64)
    for lo in range(0, g.dst.size, _CHUNK):  # a piece at a time: few temporaries
        d = g.dst[lo:lo + _CHUNK]
        one = single[d]
        d = d[one]
        root[d] = g.src[lo:lo + _CHUNK][one]
        off[d] = g.w[lo:lo + _CHUNK][one]
    if threads is not None:
        _host_fold(g, threads, single, root, root, off)  # read before written: no copy
    # the single-predecessor nodes whose root is not a meeting node: on along their chain
    jump(root, np.flatnonzero(single[root] & single).astype(root.dtype),
         lambda r: single[r], [(off, np.add)])
    stray = np.flatnonzero(single[root])  # a loop of single-predecessor nodes: left unfolded
    root[stray], off[stray] = stray, 0
    return root, off, _single_in_edges(g, single) if edges else None


@dataclass
class Visited:
    """The nodes a pass visits and its edges between them (``_visited``): per node its root
    and offset (``_fold``), whether it is folded, the derived op starts (``streamruns``);
    the visited nodes (``proc``, ascending: :meth:`number` gives a node's number among
    them) and the edges into them from visited nodes (``e_*``: source, weight, kind,
    destination; node ids of ``g``)."""

    root: np.ndarray
    off: np.ndarray
    folded: np.ndarray
    rn: Runs
    proc: np.ndarray
    e_src: np.ndarray
    e_w: np.ndarray
    e_kind: np.ndarray
    e_dst: np.ndarray

    def number(self, nodes: np.ndarray) -> np.ndarray:
        """Per node its number among the visited nodes, -1 for one not visited."""
        return numbered(self.proc, nodes)


def numbered(keys: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Per node its position in ``keys`` (ascending, distinct), -1 where it is not there: a
    lookup by search, so that no per-node numbering array is held (a worker's peak:
    docs/scale.md)."""
    nodes = np.asarray(nodes)
    if keys.size == 0:
        return np.full(nodes.shape, -1, dtype=np.int64)
    pos = np.searchsorted(keys, nodes)
    np.minimum(pos, keys.size - 1, out=pos)
    return np.where(keys[pos] == nodes, pos, -1)


def _numbering(n: int, proc: np.ndarray) -> np.ndarray:
    """Per node (of ``n``) its number among ``proc``, -1 none: the whole array (the rare
    cycle-breaking path)."""
    cid = np.full(n, -1, dtype=np.int64)
    cid[proc] = np.arange(proc.size)
    return cid


def _visited(g: Graph, m: Model, runs: bool = True) -> Visited:
    """What the longest-path pass visits: the nodes where times meet and their edges (the
    folded and derived nodes' times follow from their roots)."""
    n = g.n_nodes
    # each node's in-edges, clipped at 3 (what the fold and the runs ask: 1? 2?), one byte
    counts = np.bincount(g.dst, minlength=n)
    np.minimum(counts, 3, out=counts)
    indeg = counts.astype(np.int8)
    del counts
    trim_large(n // 2)  # the count's two per-node/per-edge temporaries: holes otherwise
    # the in-edges found again on need (_binding)
    root, off, _ = _fold(g, m.threads, indeg, edges=False)
    folded = root != np.arange(n, dtype=root.dtype)
    rn = stream_runs(g, root, off, m.o_order, indeg) if runs else no_runs()
    del indeg
    trim_large(n // 2)  # the runs' per-op temporaries
    derived = np.zeros(n, dtype=bool)
    derived[rn.node] = True
    visit = ~(folded | derived)
    proc = np.flatnonzero(visit)  # the nodes the pass visits, renumbered 0..P-1
    kept = np.nonzero(visit[g.dst])[0]
    del visit
    k_src = g.src[kept]
    e_src, e_w = root[k_src], g.w[kept] + off[k_src]
    e_kind, e_dst = g.kind[kept], g.dst[kept]
    via = derived[e_src]  # an edge out of a derived op: one from each of its two roots
    del derived
    if via.any():
        by_node = np.argsort(rn.node, kind="stable")
        j = by_node[numbered(rn.node[by_node], e_src[via])]
        e_src = np.concatenate([e_src[~via], rn.h[j], rn.s[j]])
        e_w = np.concatenate([e_w[~via], e_w[via] + rn.a[j], e_w[via] + rn.b[j]])
        e_kind = np.concatenate([e_kind[~via], e_kind[via], e_kind[via]])
        e_dst = np.concatenate([e_dst[~via], e_dst[via], e_dst[via]])
    return Visited(root, off, folded, rn, proc, e_src, e_w, e_kind, e_dst)


def _single_in_edges(g: Graph, single: np.ndarray | None = None) -> np.ndarray:
    """The edges into the nodes that have exactly one (``_fold``'s third value); ``single``:
    those nodes (bool), when the caller has them."""
    if single is None:
        single = np.bincount(g.dst, minlength=g.n_nodes) == 1
    return np.nonzero(single[g.dst])[0]
