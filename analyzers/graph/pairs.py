"""NCCL kernels coupled across any number of ranks, through the cross-rank matching.

``graph.matching`` pairs each send with its recv (by source, destination and order
between the two) and each collective's kernels across its group; the rules it used are
reported as assumptions. The replay couples every matched kernel with one partner: the
only one of a send or recv, and for a kernel with several (a collective over more than two
ranks, a batch of sends and recvs) the one that started last in the trace, the one it
waited for; when replayed, it ends its observed transfer time after the later of its own
start and that partner's. Clock offsets between ranks come from the matching too (one
clock for an Nsight report; the median end difference of matched kernels otherwise).
"""

from __future__ import annotations

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.matching import Matching, match


def _has_comm(tl: Timeline, memo: Memo | None) -> bool:
    """Whether ``tl`` has a NCCL/RCCL kernel (the matching's own test,
    ``kernel_descriptions.RankKernels``)."""
    comm = classify.comm_for_symbols(tl.names, memo)
    return bool(comm.any() and comm[tl.gpu_name].any())


def match_nccl(timelines: list[Timeline], o_base: list[int], n_ops: int,
               notes: list[str], warns: list[str], matching: Matching | None = None,
               memo: Memo | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU op of the run, its coupled NCCL kernel (-1 none) and that partner's clock
    minus this op's rank's clock (ns).

    GPU op ``o`` of ``timelines[k]`` is op ``o_base[k] + o`` of the run (``n_ops`` in all);
    ``matching``: ``match`` of the timelines with GPU work, when the caller has it;
    ``memo``: the caller's (``core.memo``).
    """
    peer = np.full(n_ops, -1, dtype=np.int64)
    clock = np.zeros(n_ops, dtype=np.int64)
    with_gpu = [k for k, tl in enumerate(timelines) if tl.n_gpu]
    if matching is None and not any(_has_comm(timelines[k], memo) for k in with_gpu):
        return peer, clock  # no NCCL kernel on any rank: nothing to couple or to warn about
    matched = (matching if matching is not None
               else match([timelines[k] for k in with_gpu], memo))
    if matched.e_pos.size == 0:
        pair_notes(matched, notes, warns)
        return peer, clock
    base = np.array([o_base[k] for k in with_gpu], dtype=np.int64)
    start_ns = np.concatenate([tl.gpu_start_ns for tl in timelines])  # run-wide op index
    offset_ns = matched.offset_ns
    kernel = base[matched.e_pos] + matched.e_op  # per edge, run-wide op indices
    partner = base[matched.f_pos] + matched.f_op
    aligned_ns = start_ns[partner] + offset_ns[matched.f_pos]
    order = np.lexsort((aligned_ns, kernel))  # per op, partners by aligned start
    last = np.append(kernel[order][1:] != kernel[order][:-1], True)
    latest = order[last]  # per kernel its edge to the partner that started last
    peer[kernel[latest]] = partner[latest]
    clock[kernel[latest]] = offset_ns[matched.e_pos[latest]] - offset_ns[matched.f_pos[latest]]
    pair_notes(matched, notes, warns)
    return peer, clock


def pair_notes(m: Matching, notes: list[str], warns: list[str]) -> None:
    """The notes and warnings of coupling the run's kernels through ``m`` (appended)."""
    if m.e_pos.size == 0:
        if any(ops.size for ops in m.comm_ops):
            warns.extend(m.warnings)
        return
    for rule, n in m.rule_counts.items():
        notes.append(f"NCCL kernels coupled across ranks by {rule}: {n} "
                     f"{'collective(s)' if rule.startswith('collective') else 'pair(s)'}")
    if np.unique(np.stack([m.e_pos, m.e_op]), axis=1).shape[1] < m.e_pos.size:
        notes.append("a NCCL kernel with several partners (a collective over more than two "
                     "ranks) is replayed against the one that started last in the trace")
    notes.extend(m.notes)
    warns.extend(m.warnings)
