"""The critical path of each step, across ranks: the chain of binding edges on the what-if's
dependency graph (``graph.events``) that set the step's end.

The graph is the run's model with nothing dropped (``graph.model``, ``DROP_NONE``): host
calls, GPU ops and matched NCCL kernels, every rule "the latest of several predecessor times
plus a fixed delay". At the recorded times (the recorded run is a fixed point of the rules),
each node's *binding* edge is the incoming edge that gives its time: the latest
``source time + weight`` (ties: the stream predecessor before a stream wait before the launch;
a matched kernel's own start before its partner's unless the partner started more than
``tol`` later; a sync's awaited op before its own cost). The path of step k starts at the end
of the latest op launched in step k on any rank, ``E_k``, and follows binding edges back to
``T_k`` (the earliest first op of step k on any rank, ``per_step.step_spans``), each edge giving
one segment on the aligned clock (``matching``) by its kind:

| edge kind | segment | category |
| --- | --- | --- |
| ``run`` (op start -> end) | [start, end] | ``compute``; a NCCL kernel: ``transfer`` (matched), ``other`` (unmatched: its wait cannot be told from its transfer) |
| ``peer`` (partner's start -> NCCL end) | [partner's start, end], then on the partner's rank | ``transfer`` (its own wait before is slack) |
| ``stream``, ``stream_wait`` (an op's end -> the next op's start) | [that end, start] | ``other`` |
| ``launch`` (host call -> op start) | [the call's start, start] | ``host_launch`` |
| ``host``, ``call`` (host time between calls; a call that did not wait) | the host interval | ``host_launch`` |
| ``sync`` (awaited op's end -> blocking call's end) | [op end, call end] | ``device_sync`` (cudaDeviceSynchronize & co.), ``event_sync`` (stream/event synchronize, blocking copies) |
| ``anchor`` (the trace's first host call, an unlinked op) | back to T_k | ``host_launch`` / ``other`` |

The walk stops at T_k (the last segment clipped). ``peer wait`` is 0 on the path by this
definition: a matched kernel's wait is slack; the category is listed so that the split
matches the bubble's. Shares are time on the path / the path's length (they sum to 1). A
segment's call site is its host call's: the launching call of the op that led onto the host
for host time (kept along the thread until a sync), the sync call for sync time
(``callsites.enclosing``, innermost annotation). Consecutive segments of one rank, category
and call are merged. Without common steps, the whole run is one window (``basis``
"window").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.crossrank.critical_walk import Chain, Segment, replay
from profplug.analyzers.graph.matching import Matching
from profplug.analyzers.graph.pathgraph import (
    CATEGORIES,
    Category,
    Partners,
    RankGraph,
    rank_graph,
    run_partners,
)
from profplug.analyzers.stalls.per_step import StepSpans

__all__ = ["CATEGORIES", "Category", "Segment", "StepEnds", "StepPath", "Walk", "critical_paths",
           "entries", "plan_walks", "rank_chain", "replay_walks", "step_ends"]


@dataclass
class StepPath:
    step: int | None  # step number (None: the whole window)
    lo_ns: int
    hi_ns: int
    segments: list[Segment] = field(default_factory=list)


Walk = tuple[int | None, int, int, int, int]  # step, lo, hi, rank position, op it ends at


@dataclass
class StepEnds:
    """What the walks need of one rank, on its own clock (ns): per complete step that
    launched an op, its number, its span's start, and its last-ending op (the first of
    them) and that end; whether it has complete steps at all; its GPU window's first
    start, and its last-ending op (the last of them) and that end."""

    nums: np.ndarray
    span_s: np.ndarray
    last_op: np.ndarray
    last_end: np.ndarray
    has_steps: bool
    first_start: int | None
    end_op: int
    end_ns: int


def step_ends(tl: Timeline, sp: StepSpans) -> StepEnds:
    """One rank's :class:`StepEnds` (``sp``: its ``per_step.step_spans``)."""
    nums, span_s, last_op, last_end = [], [], [], []
    for k, num in enumerate(tl.step_num[sp.rows].tolist()):
        ops = np.nonzero(sp.op_step == k)[0]
        if ops.size:
            j = int(ops[np.argmax(tl.gpu_end_ns[ops])])
            nums.append(num)
            span_s.append(int(sp.span_s[k]))
            last_op.append(j)
            last_end.append(int(tl.gpu_end_ns[j]))
    end_op, end_ns = -1, 0
    if tl.n_gpu:
        end_ns = int(tl.gpu_end_ns.max())
        end_op = int(np.nonzero(tl.gpu_end_ns == end_ns)[0][-1])
    return StepEnds(np.array(nums, dtype=np.int64), np.array(span_s, dtype=np.int64),
                    np.array(last_op, dtype=np.int64), np.array(last_end, dtype=np.int64),
                    bool(sp.rows.size), int(tl.gpu_start_ns.min()) if tl.n_gpu else None,
                    end_op, end_ns)


def plan_walks(ends: list[StepEnds], offset_ns: np.ndarray) -> tuple[list[Walk], Basis]:
    """The walk of every step common to the ranks (or of the whole run), and the basis."""
    windows: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for i, se in enumerate(ends):
        off = int(offset_ns[i])
        for num, s, j, e in zip(se.nums.tolist(), se.span_s.tolist(), se.last_op.tolist(),
                                se.last_end.tolist(), strict=True):
            windows[num].append((s + off, e + off, i, j))
    with_steps = sum(1 for se in ends if se.has_steps)
    walks: list[Walk] = []
    for num in sorted(windows):
        w = windows[num]
        if len(w) < with_steps:
            continue  # not a complete step on every rank that has steps
        hi, _, i, j = max((x[1], -x[2], x[2], x[3]) for x in w)
        walks.append((num, min(x[0] for x in w), hi, i, j))
    if walks:
        return walks, Basis.STEP
    last = [(se.end_ns + int(offset_ns[i]), i, se.end_op) for i, se in enumerate(ends)
            if se.end_op >= 0]
    if not last:
        return [], Basis.WINDOW
    hi, i, j = max(last)
    lo = min(se.first_start + int(offset_ns[k]) for k, se in enumerate(ends)
             if se.first_start is not None)
    return [(None, lo, hi, i, j)], Basis.WINDOW


Entries = dict[int, list[tuple[int, int]]]  # rank position -> (op, bound)


def entries(walks: list[Walk], partners: list[Partners]) -> tuple[Entries, Entries]:
    """Where the walks can enter each rank, with the lowest bound a walk there can have:
    each walk's last op end, at its step's start; each matched kernel's start (a walk
    arrives there from the partner's rank), at the lowest start of the steps whose window
    holds it. (ends, starts)."""
    lo_k = np.array([w[1] for w in walks], dtype=np.int64)
    hi_k = np.array([w[2] for w in walks], dtype=np.int64)
    order = np.argsort(lo_k, kind="stable")
    lo_s, reach = lo_k[order], np.maximum.accumulate(hi_k[order])
    starts: Entries = defaultdict(list)
    for p in partners:
        if p.op.size == 0:
            continue
        t = p.p_aligned
        # the lowest bound lo_k < t <= hi_k: the first step (by lo) whose hi reaches t
        first = np.searchsorted(reach, t, side="left")
        ok = first < np.searchsorted(lo_s, t, side="left")
        for pos, op, b in zip(p.p_pos[ok].tolist(), p.p_op[ok].tolist(),
                              lo_s[first[ok]].tolist(), strict=True):
            starts[pos].append((op, b))
    ends: Entries = defaultdict(list)
    for _, lo, _, i, j in walks:
        ends[i].append((j, lo))
    return ends, starts


def rank_chain(g: RankGraph, ends: list[tuple[int, int]], starts: list[tuple[int, int]]
               ) -> Chain:
    """The walk steps recorded on one rank's graph from its entries."""
    ch = Chain(g.pos, g.n_a, g.n_o)
    for op, lo in sorted(ends, key=lambda x: x[1]):
        ch.trace(g, g.op_end(op), lo)
    for op, lo in sorted(starts, key=lambda x: x[1]):
        ch.trace(g, g.op_start(op), lo)
    return ch


def replay_walks(walks: list[Walk], chains: dict[int, Chain],
                 extend: Callable[[int, int, int], None]) -> list[StepPath]:
    """Each walk replayed over the ranks' chains (``chains.replay``)."""
    return [StepPath(num, lo, hi, replay(chains, i, chains[i].oe_node(j), lo, extend))
            for num, lo, hi, i, j in walks]


def critical_paths(timelines: list[Timeline], m: Matching, spans: list[StepSpans], tol: int
                   ) -> tuple[list[StepPath], Basis]:
    """The path of every step common to the ranks (or of the whole run); and the basis:
    every rank's graph built in turn, in this process."""
    walks, basis = plan_walks([step_ends(tl, sp) for tl, sp in zip(timelines, spans,
                                                                    strict=True)],
                              m.offset_ns)
    if not walks:
        return [], basis
    partners = run_partners(timelines, m)
    ends, starts = entries(walks, partners)

    def graph(pos: int) -> RankGraph:
        return rank_graph(timelines[pos], pos, partners[pos], m.comm_ops[pos], m.offset_ns,
                          tol)

    chains = {pos: rank_chain(graph(pos), ends.get(pos, []), starts.get(pos, []))
              for pos in range(len(timelines))}

    def extend(pos: int, v: int, lo: int) -> None:  # a walk no entry foresaw
        chains[pos].trace(graph(pos), v, lo)

    return replay_walks(walks, chains, extend), basis
