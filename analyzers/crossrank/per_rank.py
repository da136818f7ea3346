"""The cross-rank analysis in per-rank parts: what runs where a rank is read, and what the
client joins.

1. **Facts** (:func:`rank_facts`, where the rank is read): its matching input
   (``commview``), its steps' spans and last ops (``critical.StepEnds``), its size.
2. **Plan** (:func:`plan`, the client): the matching of the views, the walks, and per rank
   an :class:`RankAsk`: its matched kernels' partners, the matching's part that is its own,
   where the walks can enter it.
3. **Parts** (:func:`rank_part`, where the rank is read): its bubbles, drain, the walk
   steps recorded on its graph (``critical_walk``) and the call sites of their calls.
4. **Join** (:func:`join`, the client): the walks replayed across the ranks' chains, the
   critical path's summary, the result.

Nothing the client receives grows with a rank's compute ops or host calls: the views, the
steps, the bubbles (per NCCL kernel and per step), the drain's figures (its queue stays
behind unless the swimlane is drawn) and the recorded walk steps (the nodes the walks can
visit: 1-2% of them on the runs measured). ``analysis.cross_rank`` runs the four in one
process; ``dispatch`` runs 1 and 3 on the workers (docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from profplug.analyzers.core.errors import ClocksApart, ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline, launch_times, launch_tops
from profplug.analyzers.crossrank.bubbles import Binding, RankBubbles, rank_bubbles
from profplug.analyzers.crossrank.critical import (
    StepEnds,
    StepPath,
    Walk,
    entries,
    plan_walks,
    rank_chain,
    replay_walks,
    step_ends,
)
from profplug.analyzers.crossrank.critical_walk import Chain
from profplug.analyzers.crossrank.drain import Queue, RankDrain, rank_drain
from profplug.analyzers.graph.commview import CommView, comm_view, match_views
from profplug.analyzers.graph.matching import RULES, Matching
from profplug.analyzers.graph.pathgraph import Partners, RankGraph, partners, rank_graph
from profplug.analyzers.stalls.callsites import enclosing
from profplug.analyzers.stalls.per_step import step_spans


@dataclass
class RankFacts:
    """One rank's first-round part: its matching input and its steps for the walks."""

    rank: int
    view: CommView
    ends: StepEnds


def rank_ends(tl: Timeline, view: CommView | None = None, memo: Memo | None = None
              ) -> StepEnds:
    """One rank's steps for the walks (where it is read): its steps' spans and last ops
    (``memo``: the caller's, ``core.memo``)."""
    return step_ends(tl, step_spans(tl, launch_times(tl, launch_tops(tl, memo))))


def rank_facts(tl: Timeline, memo: Memo | None = None) -> RankFacts:
    """:class:`RankFacts` of one rank (where it is read; ``memo``: the caller's,
    ``core.memo``)."""
    return RankFacts(tl.rank, comm_view(tl, memo), rank_ends(tl, memo=memo))


@dataclass
class RankAsk:
    """What the client sends a rank for its second-round part: its position and rank, the
    part of the matching it reads (its NCCL kernels, every rank's offset, the rule that
    matched it), its matched kernels' partners, where the walks can enter it, and the
    tolerance (ns)."""

    pos: int
    rank: int
    m: Matching
    rule: str  # the rule that matched most of its kernels (``Matching.rank_rule``)
    partners: Partners
    ends: list[tuple[int, int]]
    starts: list[tuple[int, int]]
    tol: int


@dataclass
class Plan:
    """The client's plan of a run: the matching, the walks (``critical.Walk``) and their
    basis, every rank's :class:`RankAsk`."""

    m: Matching
    walks: list[Walk]
    basis: str
    asks: list[RankAsk] = field(default_factory=list)


def own_matching(m: Matching, pos: int) -> Matching:
    """``m`` as rank position ``pos``'s part reads it: its own NCCL kernels, the ranks and
    their offsets, no edge (its bubbles take the rule that matched it, ``RankAsk.rule``)."""
    none = np.zeros(0, dtype=np.int64)
    return replace(m, e_pos=none, e_op=none, f_pos=none, f_op=none, e_rule=none, e_dir=none,
                   comm_ops=[ops if p == pos else none for p, ops in enumerate(m.comm_ops)],
                   unmatched=[], notes=[], warnings=[], rule_counts={})


def rank_rules(m: Matching) -> list[str]:
    """``m.rank_rule(pos)`` of every rank position, in one pass over the edges."""
    n = len(m.ranks)
    if m.e_pos.size == 0:
        return ["unmatched"] * n
    kernels = np.unique(np.stack([m.e_pos, m.e_op, m.e_rule]), axis=1)  # (rank, kernel, rule)
    counts = np.zeros((n, len(RULES)), dtype=np.int64)
    np.add.at(counts, (kernels[0], kernels[2]), 1)
    return [RULES[int(c.argmax())] if c.any() else "unmatched" for c in counts]


def plan(facts: list[RankFacts], tol: int, m: Matching | None = None,
         parts: list[Partners] | None = None) -> Plan:
    """Match the ranks' views, plan the walks, and ask each rank for its part. Raises the
    cross-rank analysis's one-line error for ranks that cannot share a clock. ``m``: the
    matching, when the caller has it (the same as the views': ``commview``); ``parts``: its
    partners (``pathgraph.partners``), when the caller has them."""
    m = m if m is not None else match_views([f.view for f in facts])
    if m.clock_refused:  # ranks that cannot be put on one time axis (clocks.py)
        raise ClocksApart(f"cross-rank analysis not run: {m.clock_refused}")
    walks, basis = plan_walks([f.ends for f in facts], m.offset_ns)

    def start_of(pos: int, ops: np.ndarray) -> np.ndarray:
        v = facts[pos].view
        return v.tl.gpu_start_ns[np.searchsorted(v.op_index, ops)]

    parts = parts if parts is not None else partners(m, start_of)
    ends, starts = entries(walks, parts) if walks else ({}, {})
    rules = rank_rules(m)
    asks = [RankAsk(pos, facts[pos].rank, own_matching(m, pos), rules[pos], parts[pos],
                    ends.get(pos, []), starts.get(pos, []), tol) for pos in range(len(facts))]
    return Plan(m, walks, basis, asks)


@dataclass
class RankPart:
    """One rank's second-round part: its bubbles and drain, the walk steps recorded on its
    graph, and the call site of every call those steps name (API row -> label)."""

    bubbles: RankBubbles
    drain: RankDrain
    chain: Chain
    labels: dict[int, str]


def _binding(tl: Timeline, ask: RankAsk) -> Binding:
    """The rank's ``bubbles.Binding`` from its partners (the same choice of partner)."""
    p = ask.partners
    pos = np.full(tl.n_gpu, -1, dtype=np.int64)
    op = np.full(tl.n_gpu, -1, dtype=np.int64)
    start = np.full(tl.n_gpu, np.iinfo(np.int64).min, dtype=np.int64)
    pos[p.op], op[p.op] = p.p_pos, p.p_op
    start[p.op] = p.p_aligned - int(ask.m.offset_ns[ask.pos])
    return Binding(pos, op, start)


def rank_part(tl: Timeline, ask: RankAsk, memo: Memo | None = None) -> RankPart:
    """One rank's :class:`RankPart` (where it is read): its graph first (the peak of a
    worker's memory, docs/scale.md), then what is small."""
    chain = Chain(ask.pos, int(tl.api_start_ns.size), tl.n_gpu)
    if ask.ends or ask.starts:
        g = asked_graph(tl, ask, memo)
        chain = rank_chain(g, ask.ends, ask.starts)
        del g
    spans = step_spans(tl, launch_times(tl, launch_tops(tl, memo)))
    bub = rank_bubbles(tl, ask.pos, ask.m, _binding(tl, ask), spans, ask.rule)
    return RankPart(bub, rank_drain(tl, spans, memo), chain, chain_labels(tl, chain))


def asked_graph(tl: Timeline, ask: RankAsk, memo: Memo | None = None) -> RankGraph:
    """The rank's graph as its ask describes it (``pathgraph.rank_graph``)."""
    return rank_graph(tl, ask.pos, ask.partners, ask.m.comm_ops[ask.pos], ask.m.offset_ns,
                      ask.tol, memo)


def chain_labels(tl: Timeline, chain: Chain) -> dict[int, str]:
    """The call site of every call a rank's recorded walk steps name (API row -> label)."""
    rows = sorted({c for c in (*chain.call, *chain.sets) if c >= 0})
    if not rows:
        return {}
    c = np.array(rows, dtype=np.int64)
    return dict(zip(rows, enclosing(tl, tl.api_start_ns[c], tl.api_end_ns[c], tl.api_tid[c]),
                    strict=True))


def travelled(part: RankPart) -> RankPart:
    """``part`` as it leaves the worker: without the drain's queue (per launch; only the
    swimlane, which is drawn in process, reads it)."""
    none = np.zeros(0, dtype=np.int64)
    return replace(part, drain=replace(part.drain, queue=Queue(none, none)))


NO_EXTEND_WHY = ("a critical path went where no recorded walk did (its rank's graph is "
                 "not in this process)")


def no_extend(pos: int, v: int, lo: int) -> None:
    """The walks' ``extend`` where the ranks' graphs are elsewhere (the workers)."""
    del pos, v, lo
    raise ProfplugError(f"cross-rank analysis: {NO_EXTEND_WHY}")


def join(p: Plan, parts: list[RankPart], extend: Callable[[int, int, int], None] = no_extend
         ) -> list[StepPath]:
    """The walks replayed across the ranks' recorded steps (``extend``: what records a
    walk that went where none was recorded)."""
    return replay_walks(p.walks, {i: part.chain for i, part in enumerate(parts)}, extend) \
        if p.walks else []


def site_labels(parts: list[RankPart]) -> dict[tuple[int, int], str]:
    """(rank position, API row) -> call site, from the ranks' parts."""
    return {(pos, row): lab for pos, part in enumerate(parts)
            for row, lab in part.labels.items()}

