"""The what-if where the ranks are read: per-rank reductions, a solve in the client, per-rank
results (docs/scale.md, "The what-if where the ranks are read").

1. **Reductions** (:func:`rank_reductions`, where a rank is read): its model on its own,
   its recorded and dropped graphs reduced to where their times meet, its NCCL kernels'
   ends cut (``joined_replay``); whether it has a synchronize inside a pipeline send/recv (the
   ``policy`` rule's fallback looks at every rank), its notes and warnings.
2. **Solve** (:func:`plan`, the client): the drop rule resolved over the ranks, the
   matched kernels' ``run`` and ``peer`` edges (the partner each kernel is replayed
   against: ``graph.pathgraph.partners``), both replays solved on the joined reduced
   graphs; per rank a :class:`WhatIfAsk`: its kernels' solved end times.
3. **Results** (:func:`rank_whatif`, where a rank is read): both replays of its graph with
   its kernels' ends anchored at the solved times (every node at the run's replay's time),
   and its :class:`~.result.RankWhatIf`, as ``predict`` makes it.
4. **Join** (:func:`joined`, the client): the run's :class:`~.result.WhatIfResult`.

The client holds the reduced graphs (the nodes where times meet, 1-3% of a rank's nodes on
the samples) and nothing per event. A run whose joined graph has a cycle (a contradictory
pairing, which the one-process replay breaks by forcing a kernel) is not solved here
(:data:`CYCLE`).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.dropat import most_common, resolve_in
from profplug.analyzers.graph.dropset import DROP_DEVICE, DROP_POLICY, FALLBACK_NOTE, policy_mask
from profplug.analyzers.graph.events import DROPPED_GRAPH_READS, build_graph, dropped_graph
from profplug.analyzers.graph.matching import Matching
from profplug.analyzers.graph.model import DropSpec, Model, build_model, coupled, only, replay_only
from profplug.analyzers.graph.pairs import pair_notes
from profplug.analyzers.graph.pathgraph import Partners, _alone
from profplug.analyzers.stalls.rank import StallOptions, analyze_rank
from profplug.analyzers.whatif.bands import set_bands, withhold_bands
from profplug.analyzers.whatif.bound import apply_bound, bound_note
from profplug.analyzers.whatif.joined_replay import (
    Link,
    Reduced,
    anchored,
    cut,
    reanchored,
    reduce,
    solve,
)
from profplug.analyzers.whatif.model_links import RESULTS_READ
from profplug.analyzers.whatif.peers import peers_warning, world_size
from profplug.analyzers.whatif.predict import ASSUMPTIONS
from profplug.analyzers.whatif.rank_prediction import (
    predict_rank,
    recorded_side,
    with_replayed_time,
)
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult
from profplug.analyzers.whatif.simulate import replay, times_only

CYCLE = ("what-if: the ranks' coupled replay has a cycle (a contradictory NCCL pairing) "
         "that only the replay of the whole run in one process breaks")


@dataclass
class RankReductions:
    """One rank's first-round part of the what-if (module docstring, 1). ``drop``: its
    dropped graph by the rule as this rank alone resolves it; ``kept``: with the ``policy``
    rule on a rank without such a synchronize, its dropped graph with nothing dropped (the
    rule when another rank has one)."""

    rank: int
    policy: bool
    world_size: int | None
    notes: list[str]
    warns: list[str]
    rec: Reduced
    drop: Reduced
    kept: Reduced | None = None

    @property
    def nbytes(self) -> int:
        return self.rec.nbytes + self.drop.nbytes + (self.kept.nbytes if self.kept else 0)


def _nothing_dropped(m: Model) -> Model:
    """``m`` with no call dropped (each host gap as ``model._host_seqs`` makes it then)."""
    return replace(m, a_dropped=np.zeros_like(m.a_dropped), a_gap_drop=np.maximum(m.a_gap, 0))


# what a rank's reductions read of its model once its graph is built: the sizes, the
# passes' thread lists and stream order (``visited._visited``), the dropped graph's inputs
REDUCE_READS = ("a_start", "o_start", "threads", "o_order", "a_dropped", *DROPPED_GRAPH_READS)


def rank_model(tl: Timeline, kinds: str, nothing: bool = False,
               callsite: str | None = None, memo: Memo | None = None) -> Model:
    """One rank's model on its own (no partner) by the rule ``kinds`` (``policy`` falls back
    on this rank alone), at ``callsite`` only when given (``--drop-at``, resolved over the
    run: ``dropat``); ``nothing``: no call dropped (:func:`_nothing_dropped`)."""
    m = build_model([tl], DropSpec(kinds=kinds, callsite=callsite), matching=_alone(tl.rank),
                    memo=memo)
    trim_large(m.n_events)  # the build's temporaries: the graph starts from what is live
    return _nothing_dropped(m) if nothing else m


def rank_reductions(tl: Timeline, kinds: str, ops: np.ndarray,
                    callsite: str | None = None) -> RankReductions:
    """:class:`RankReductions` of one rank; ``ops``: its NCCL kernels (``commview``);
    ``callsite``: the resolved ``--drop-at`` (``kinds`` then not ``policy``)."""
    memo = Memo()  # this rank's: its kinds, launches and policy mask once
    policy = kinds == DROP_POLICY and bool(policy_mask(tl, memo).any())
    m = rank_model(tl, kinds, callsite=callsite, memo=memo)
    mk = _nothing_dropped(m) if kinds == DROP_POLICY and not policy else None
    # one graph at a time, its variants made from it in place (a worker's memory:
    # docs/scale.md); once it exists, the model's inputs to it go
    g = build_graph(m, drop=False)
    m = only(m, REDUCE_READS)
    mk = only(mk, REDUCE_READS) if mk is not None else None
    trim_large(m.n_events)
    g = cut(g, ops)  # in place: a column more than the graph, once the model's inputs went
    rec = reduce(g, m, ops, is_cut=True)
    trim_large(m.n_events)  # each reduction's pass starts from what is live
    # nothing dropped: only the host gaps' weights change (a copy of the weights)
    kept = reduce(dropped_graph(g, mk), mk, ops, is_cut=True) if mk is not None else None
    trim_large(m.n_events)
    drop = reduce(dropped_graph(g, m, in_place=True), m, ops, is_cut=True)
    del g
    return RankReductions(tl.rank, policy, world_size(tl), list(m.assumptions),
                          list(m.warnings), rec, drop, kept)


@dataclass
class WhatIfAsk:
    """What the client sends a rank for its result: the rule (as asked; ``nothing``: none
    of its calls dropped), its NCCL kernels, their ends' solved times in the recorded and
    the dropped replay (ns), the stall options."""

    rank: int
    kinds: str
    nothing: bool
    ops: np.ndarray
    rec_ends: np.ndarray
    drop_ends: np.ndarray
    options: StallOptions
    callsite: str | None = None  # --drop-at, resolved


@dataclass
class WhatIfPlan:
    """The client's part: the rule replayed, its note, the notes and warnings of the run's
    model, whether kernels are coupled, each rank's ask, the solve's seconds."""

    kinds: str
    drop_note: str | None
    notes: list[str]
    warns: list[str]
    coupled: bool
    asks: list[WhatIfAsk] = field(default_factory=list)
    solve_s: float = 0.0
    callsite: str | None = None  # --drop-at, resolved


def _links(ops: list[np.ndarray], starts: list[np.ndarray], ends: list[np.ndarray],
           parts: list[Partners]) -> tuple[Link, int]:
    """The ``run`` edges (every kernel's start to its end) and ``peer`` edges (the partner's
    start to the kernel's end) between the reduced graphs, as ``events.build_graph`` weighs
    them; and how many kernels ended before their partner started (``model.coupled``)."""
    pos_l, i_l, w_run, pp, pi, tp, ti, w_peer = [], [], [], [], [], [], [], []
    n_late = 0
    for pos, p in enumerate(parts):
        n = ops[pos].size
        w = ends[pos] - starts[pos]
        if p.op.size:
            i = np.searchsorted(ops[pos], p.op)
            qi = np.empty(i.size, dtype=np.int64)  # the partner's index among its kernels
            for x in np.unique(p.p_pos).tolist():
                sel = p.p_pos == x
                qi[sel] = np.searchsorted(ops[x], p.p_op[sel])
            ck, xfer, late = coupled(starts[pos][i], ends[pos][i], p.p_start,
                                     np.ones(i.size, dtype=bool), p.clock)
            n_late += late
            w = w.copy()
            w[i] = xfer
            pp.append(p.p_pos)
            pi.append(qi)
            tp.append(np.full(i.size, pos))
            ti.append(i)
            w_peer.append(xfer - ck)
        pos_l.append(np.full(n, pos))
        i_l.append(np.arange(n))
        w_run.append(w)

    def cat(x: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(x).astype(np.int64) if x else np.zeros(0, dtype=np.int64)

    idx = cat(pos_l)
    return Link(cat([idx, *pp]), cat([*i_l, *pi]), cat([idx, *tp]), cat([*i_l, *ti]),
                cat([*w_run, *w_peer])), n_late


def plan(red: list[RankReductions], m: Matching, parts: list[Partners], ops: list[np.ndarray],
         starts: list[np.ndarray], ends: list[np.ndarray], drop: DropSpec,
         options: StallOptions) -> WhatIfPlan:
    """Resolve the rule, join the ranks' reductions (rank positions as in ``m``) and solve
    both replays; raises :data:`CYCLE` (a ProfplugError) when the joined graph has one."""
    t0 = time.perf_counter()
    kinds, note = drop.kinds, None
    if kinds == DROP_POLICY and not any(r.policy for r in red):
        kinds, note = DROP_DEVICE, FALLBACK_NOTE
    nothing = [drop.kinds == DROP_POLICY and kinds == DROP_POLICY and not r.policy for r in red]
    notes = [n for r in red for n in r.notes]
    warns = [w for r in red for w in r.warns]
    if any(o.size for o in ops):
        pair_notes(m, notes, warns)
    link, n_late = _links(ops, starts, ends, parts)
    if n_late:
        notes.append(f"{n_late} NCCL kernel(s) ended before their partner started "
                     "on the aligned clock: each such pair's clock offset is taken so that the "
                     "partner started as the kernel ended")
    t_rec = solve([r.rec for r in red], link)
    dropped = [r.kept if k and r.kept is not None else r.drop for r, k in zip(red, nothing,
                                                                            strict=True)]
    t_drop = solve(dropped, link) if t_rec is not None else None
    if t_rec is None or t_drop is None:
        raise ProfplugError(CYCLE)
    asks = [WhatIfAsk(r.rank, drop.kinds, k, ops[i], t_rec[i], t_drop[i], options,
                      drop.callsite) for i, (r, k) in enumerate(zip(red, nothing, strict=True))]
    return WhatIfPlan(kinds, note, notes, warns, any(p.op.size for p in parts), asks,
                      time.perf_counter() - t0, drop.callsite)


def rank_whatif(tl: Timeline, ask: WhatIfAsk) -> RankWhatIf:
    """One rank's result (where it is read): both replays of its graph with its kernels'
    ends at the solved times, compared as ``predict`` does."""
    memo = Memo()  # this rank's: its kinds, launches and policy mask once
    # the recorded side of the result first: its stall analysis (the brief one, its
    # kinds and launches its own, as the model's) on the timeline alone, before the model
    # and the graph exist; the replay made, it goes before the other is made (a worker's
    # memory: docs/scale.md)
    rs = analyze_rank(tl, ask.options, brief=True, memo=memo)
    trim_large(tl.n_events)
    m = rank_model(tl, ask.kinds, ask.nothing, ask.callsite, memo)
    side = recorded_side(tl, m, rs)
    del rs
    # one graph for both replays, anchored, then made the dropped one in place
    g = build_graph(m, drop=False)
    m = replay_only(m, keep=DROPPED_GRAPH_READS + RESULTS_READ)
    trim_large(m.n_events)
    g = anchored(g, ask.ops, ask.rec_ends)  # in place, once the model's inputs went
    rec = with_replayed_time(tl, m, times_only(replay(m, False, graph=g)), side)
    del side
    g = reanchored(dropped_graph(g, m, in_place=True), ask.drop_ends)
    m = replay_only(m, keep=RESULTS_READ)
    trim_large(m.n_events)
    drp = times_only(replay(m, True, graph=g))
    del g
    trim_large(m.n_events)
    return predict_rank(tl, m, rec, drp, ask.options).figures


def joined(p: WhatIfPlan, results: list[RankWhatIf], all_ranks: list[int],
           sizes: list[int], comm: bool, n_events: int, t0: float) -> WhatIfResult:
    """The run's result from the plan and the ranks' results (in the report's rank order);
    ``all_ranks``: every rank read; ``sizes``: the world sizes their metadata gives;
    ``comm``: a rank read runs NCCL kernels; ``n_events``: the run's API calls + GPU
    ops."""
    apply_bound(results, p.coupled)
    set_bands(results, coupled=p.coupled)
    if peers := peers_warning(all_ranks, sizes, comm):
        withhold_bands(results)
    bound = bound_note(results)
    warnings = [*([peers] if peers else []), *([bound] if bound else []), *p.warns]
    if not any(r.dropped_calls for r in results):
        warnings.append("no call matched the drop rule: the prediction equals the replay")
    return WhatIfResult(
        drop=p.kinds, callsite=p.callsite, ranks=results, drop_note=p.drop_note,
        assumptions=[*ASSUMPTIONS, *p.notes], warnings=warnings, n_events=n_events,
        replay_s=time.perf_counter() - t0,
        max_model_error_pct=max((abs(r.model_error_pct) for r in results), default=0.0))


def resolved_at(drop: DropSpec, counts: list[Counter[str]]) -> DropSpec:
    """``--drop-at``'s rule as the replay takes it (``dropset.resolve``: ``policy`` is
    ``device-sync`` at a call site), its call site resolved over the ranks' sync call sites
    (``dropat.site_counts``, in rank order); ProfplugError when it names none or several."""
    kinds = DROP_DEVICE if drop.kinds == DROP_POLICY else drop.kinds
    assert drop.callsite is not None
    return DropSpec(kinds, resolve_in(drop.callsite, most_common(counts), kinds))

