"""The critical path of each step, across ranks: the chain of binding edges on the what-if's
dependency graph (``whatif.graph``) that set the step's end.

The graph is the run's model with nothing dropped (``whatif.model``, ``DROP_NONE``): host
calls, GPU ops and matched NCCL kernels, every rule "the latest of several predecessor times
plus a fixed delay". At the recorded times (the recorded run is a fixed point of the rules),
each node's *binding* edge is the incoming edge that gives its time: the latest
``source time + weight`` (ties: the stream predecessor before a stream wait before the launch;
a matched kernel's own start before its partner's unless the partner started more than
``tol`` later; a sync's awaited op before its own cost). The path of step k starts at the end
of the latest op launched in step k on any rank, ``E_k``, and follows binding edges back to
``T_k`` (the earliest first op of step k on any rank, ``steps.step_spans``), each edge giving
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
from dataclasses import dataclass, field

import numpy as np

from ..callsites import enclosing
from ..steps import StepSpans
from ..timeline import Timeline
from .chains import Chain, Segment, replay
from .matching import Matching
from .pathgraph import (
    CATEGORIES,
    COMPUTE,
    DEV_SYNC,
    EVT_SYNC,
    HOST_LAUNCH,
    OTHER,
    PEER_WAIT,
    TRANSFER,
    RankGraph,
    rank_graph,
    run_partners,
)

__all__ = ["CATEGORIES", "COMPUTE", "DEV_SYNC", "EVT_SYNC", "HOST_LAUNCH", "OTHER", "PEER_WAIT",
           "TRANSFER", "Segment", "StepPath", "call_sites", "critical_paths"]


@dataclass
class StepPath:
    step: int | None  # step number (None: the whole window)
    lo_ns: int
    hi_ns: int
    segments: list[Segment] = field(default_factory=list)


def critical_paths(timelines: list[Timeline], m: Matching, spans: list[StepSpans], tol: int
                   ) -> tuple[list[StepPath], str]:
    """The path of every step common to the ranks (or of the whole run); and the basis."""
    windows: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for i, (tl, sp) in enumerate(zip(timelines, spans, strict=True)):
        if sp.rows.size == 0:
            continue
        nums = tl.step_num[sp.rows]
        e_al = tl.gpu_end_ns + m.offset_ns[i]
        for k, num in enumerate(nums.tolist()):
            ops = np.nonzero(sp.op_step == k)[0]
            if ops.size:
                j = int(ops[np.argmax(e_al[ops])])
                windows[num].append((int(sp.span_s[k] + m.offset_ns[i]), int(e_al[j]), i, j))
    with_steps = sum(1 for sp in spans if sp.rows.size)
    # each walk: (step, lo, hi, rank position, op whose end it starts from)
    walks: list[tuple[int | None, int, int, int, int]] = []
    for num in sorted(windows):
        w = windows[num]
        if len(w) < with_steps:
            continue  # not a complete step on every rank that has steps
        hi, _, i, j = max((x[1], -x[2], x[2], x[3]) for x in w)
        walks.append((num, min(x[0] for x in w), hi, i, j))
    basis = "step"
    if not walks:
        basis = "window"
        ends = [(int(tl.gpu_end_ns[o] + m.offset_ns[i]), i, o) for i, tl in enumerate(timelines)
                for o in range(tl.n_gpu)]
        if not ends:
            return [], basis
        hi, i, j = max(ends)
        lo = min(int(tl.gpu_start_ns.min() + m.offset_ns[k]) for k, tl in enumerate(timelines)
                 if tl.n_gpu)
        walks = [(None, lo, hi, i, j)]
    chains = _chains(timelines, m, tol, walks)
    return [StepPath(num, lo, hi, replay(chains.chains, i, chains.end_node(i, j), lo,
                                         chains.extend))
            for num, lo, hi, i, j in walks], basis


class _RunChains:
    """Every rank's :class:`chains.Chain`, recorded one rank's graph at a time from the
    entries the walks can take (``extend``: a rank's graph built again for a walk no
    entry foresaw; none on the runs tested)."""

    def __init__(self, timelines: list[Timeline], m: Matching, tol: int) -> None:
        self.timelines, self.m, self.tol = timelines, m, tol
        self.partners = run_partners(timelines, m)
        self.chains: dict[int, Chain] = {}
        self.n_o = [tl.n_gpu for tl in timelines]
        self.rebuilt = 0

    def graph(self, pos: int) -> RankGraph:
        return rank_graph(self.timelines[pos], pos, self.partners[pos], self.m.comm_ops[pos],
                          self.m.offset_ns, self.tol)

    def end_node(self, pos: int, op: int) -> int:
        return 2 * self.chains[pos].n_a + self.n_o[pos] + op

    def extend(self, pos: int, v: int, lo: int) -> None:
        self.rebuilt += 1
        self.chains[pos].trace(self.graph(pos), v, lo)


def _chains(timelines: list[Timeline], m: Matching, tol: int,
            walks: list[tuple[int | None, int, int, int, int]]) -> _RunChains:
    """The ranks' chains from every entry of ``walks``: each walk's last op end, at its
    step's bound; each matched kernel's start (where a walk arrives from its partner's
    rank), at the lowest bound of the steps whose window holds it."""
    run = _RunChains(timelines, m, tol)
    lo_k = np.array([w[1] for w in walks], dtype=np.int64)
    hi_k = np.array([w[2] for w in walks], dtype=np.int64)
    order = np.argsort(lo_k, kind="stable")
    lo_s, reach = lo_k[order], np.maximum.accumulate(hi_k[order])
    starts: dict[int, list[tuple[int, int]]] = defaultdict(list)  # pos -> (op, bound)
    for p in run.partners:
        if p.op.size == 0:
            continue
        t = p.p_aligned
        # the lowest bound lo_k < t <= hi_k: the first step (by lo) whose hi reaches t
        first = np.searchsorted(reach, t, side="left")
        ok = first < np.searchsorted(lo_s, t, side="left")
        for pos, op, b in zip(p.p_pos[ok].tolist(), p.p_op[ok].tolist(),
                              lo_s[first[ok]].tolist(), strict=True):
            starts[pos].append((op, b))
    ends: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for _, lo, _, i, j in walks:
        ends[i].append((j, lo))
    for pos in range(len(timelines)):
        g = run.graph(pos)
        ch = run.chains[pos] = Chain(pos, g.n_a)
        for op, lo in sorted(ends.get(pos, []), key=lambda x: x[1]):
            ch.trace(g, g.op_end(op), lo)
        for op, lo in sorted(starts.get(pos, []), key=lambda x: x[1]):
            ch.trace(g, g.op_start(op), lo)
        del g
    return run


def call_sites(timelines: list[Timeline], paths: list[StepPath]) -> dict[tuple[int, int], str]:
    """(rank position, API row) -> call site, for every call on the paths."""
    want: dict[int, set[int]] = defaultdict(set)
    for sp in paths:
        for s in sp.segments:
            if s.call >= 0:
                want[s.pos].add(s.call)
    out: dict[tuple[int, int], str] = {}
    for p, calls in want.items():
        tl = timelines[p]
        c = np.array(sorted(calls), dtype=np.int64)
        labels = enclosing(tl, tl.api_start_ns[c], tl.api_end_ns[c], tl.api_tid[c])
        out.update({(p, int(x)): lab for x, lab in zip(c.tolist(), labels, strict=True)})
    return out
