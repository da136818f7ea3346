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
    or at the thread's first start (its root: the source). ``single``: per node whether it
    has one in-edge; ``src1``: that edge's source. ``root``/``off`` are updated in place for
    the nodes of the threads; a thread a piece at a time (``_CHUNK`` nodes: few
    temporaries), the open segment carried from one piece to the next."""
    for calls in threads:
        # nothing open at a thread's start: the last node, its offset sum, the open
        # segment's offset and root
        last, sum_end, open_adjust, open_root = -1, 0, 0, 0
        for lo in range(0, calls.size, _CHUNK // 2):
            piece = calls[lo:lo + _CHUNK // 2]
            nodes = np.empty(2 * piece.size, dtype=root.dtype)
            nodes[0::2], nodes[1::2] = piece, g.n_a + piece  # start, end, next start, ...
            one_in, pred = single[nodes], src1[nodes]  # read before written (src1 may be root)
            continues = one_in.copy()
            continues[1:] &= pred[1:] == nodes[:-1]  # the one predecessor is the node before
            continues[0] &= bool(pred[0] == last)  # (a thread's first start: never)
            starts = ~continues
            head = np.flatnonzero(starts)  # the segments' first nodes (few: the waits)
            head_one_in = one_in[head]
            step = off[nodes]
            head_step = np.where(head_one_in, step[head], 0)  # a head's own one step
            step[starts] = 0  # the one in-edge's weight (root/off: one step so far)
            offset_sum = np.cumsum(step, out=step)
            offset_sum += sum_end
            # per segment (the open one from the piece before first) its offset and root
            adjust = np.concatenate(([open_adjust], offset_sum[head] - head_step))
            roots = np.concatenate(([open_root], np.where(head_one_in, pred[head], nodes[head])))
            segment = np.cumsum(starts, dtype=root.dtype)  # 0: the open segment
            off[nodes] = offset_sum - adjust[segment]
            root[nodes] = roots[segment]
            last, sum_end = int(nodes[-1]), int(offset_sum[-1])
            open_adjust, open_root = int(adjust[-1]), int(roots[-1])


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
    and offset (``_fold``, ns), whether it is folded, the derived op starts
    (``streamruns``); the visited nodes (``nodes``, ascending: :meth:`number` gives a node's
    number among them) and the edges into them from visited nodes (``e_*``: source, weight,
    kind, destination; node ids of ``g``)."""

    root: np.ndarray
    offset_ns: np.ndarray
    folded: np.ndarray
    derived: Runs
    nodes: np.ndarray
    e_src: np.ndarray
    e_w: np.ndarray
    e_kind: np.ndarray
    e_dst: np.ndarray

    def number(self, nodes: np.ndarray) -> np.ndarray:
        """Per node its number among the visited nodes, -1 for one not visited."""
        return numbered(self.nodes, nodes)


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


def _numbering(n: int, nodes: np.ndarray) -> np.ndarray:
    """Per node (of ``n``) its number among ``nodes``, -1 none: the whole array (the rare
    cycle-breaking path)."""
    number = np.full(n, -1, dtype=np.int64)
    number[nodes] = np.arange(nodes.size)
    return number


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
    root, offset_ns, _ = _fold(g, m.threads, indeg, edges=False)
    folded = root != np.arange(n, dtype=root.dtype)
    derived = stream_runs(g, root, offset_ns, m.o_order, indeg) if runs else no_runs()
    del indeg
    trim_large(n // 2)  # the runs' per-op temporaries
    is_derived = np.zeros(n, dtype=bool)
    is_derived[derived.node] = True
    visit = ~(folded | is_derived)
    nodes = np.flatnonzero(visit)  # the nodes the pass visits, renumbered 0..P-1
    edges_in = np.nonzero(visit[g.dst])[0]
    del visit
    edge_src = g.src[edges_in]
    e_src, e_w = root[edge_src], g.w[edges_in] + offset_ns[edge_src]
    e_kind, e_dst = g.kind[edges_in], g.dst[edges_in]
    from_derived = is_derived[e_src]  # an edge out of a derived op: one from each of its roots
    del is_derived
    if from_derived.any():
        by_node = np.argsort(derived.node, kind="stable")
        run = by_node[numbered(derived.node[by_node], e_src[from_derived])]
        plain = ~from_derived
        e_src = np.concatenate([e_src[plain], derived.h[run], derived.s[run]])
        e_w = np.concatenate([e_w[plain], e_w[from_derived] + derived.a[run],
                              e_w[from_derived] + derived.b[run]])
        e_kind = np.concatenate([e_kind[plain], e_kind[from_derived], e_kind[from_derived]])
        e_dst = np.concatenate([e_dst[plain], e_dst[from_derived], e_dst[from_derived]])
    return Visited(root, offset_ns, folded, derived, nodes, e_src, e_w, e_kind, e_dst)


def _single_in_edges(g: Graph, single: np.ndarray | None = None) -> np.ndarray:
    """The edges into the nodes that have exactly one (``_fold``'s third value); ``single``:
    those nodes (bool), when the caller has them."""
    if single is None:
        single = np.bincount(g.dst, minlength=g.n_nodes) == 1
    return np.nonzero(single[g.dst])[0]
