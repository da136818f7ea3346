"""The run-level analyses where the ranks are read: the cross-rank analysis's per-rank parts
(``crossrank.per_rank``) and the what-if's (``whatif.rounds``) run on the workers in two rounds, and the
client joins them (docs/scale.md, "What runs where").

Round one rides on the report's own read (``dispatch.RankTask.extra`` = :class:`Facts`):
each worker sends back, with its ranks' stall analyses, their matching inputs and step
ends, and with the what-if on, their reduced replay graphs. The client matches, plans the
walks, solves the what-if's coupled replay, and sends each file one task (:class:`Parts`)
with its ranks' asks; the worker reads the file again (through the per-rank cache when
there is one) and sends back each rank's bubbles, drain figures, recorded walk steps and
their call sites, and its what-if result. The client holds no rank's timeline.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.optional import debug, failure
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank.analysis import joined
from profplug.analyzers.crossrank.lanes import (
    LaneAsk,
    LaneRow,
    gaps_in,
    lane_ask,
    lane_row,
    lane_span,
)
from profplug.analyzers.crossrank.per_rank import (
    Plan,
    RankAsk,
    RankFacts,
    RankPart,
    join,
    plan,
    rank_facts,
    rank_part,
    travelled,
)
from profplug.analyzers.crossrank.swimlane import joined_lanes
from profplug.analyzers.graph.commview import match_views
from profplug.analyzers.graph.dropat import site_counts
from profplug.analyzers.graph.model import DropSpec
from profplug.analyzers.graph.pathgraph import partners
from profplug.analyzers.scale.dispatch import Backend, RankTask, gather
from profplug.analyzers.stalls.rank import RankResult, StallOptions
from profplug.analyzers.whatif import rounds
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult

# how the warnings name the what-if (its key in a report is ``core.analysis_spec.WHATIF``)
WHATIF_LABEL = "what-if"


def _guarded(fn: object, *args: object) -> object:
    """``fn(*args)``, or its failure's one warning line (``optional.failure``): a part that fails
    on the worker costs its analysis, not the file's read."""
    try:
        return fn(*args)  # type: ignore[operator]
    except Exception as exc:  # isolation is the point
        if debug() and not isinstance(exc, ProfplugError):
            raise
        return failure(WHATIF_LABEL, exc)


def _trim(tl: Timeline) -> None:
    """The heap's freed memory back to the OS before a rank's next part (a big rank's):
    each part starts from what is live (a worker's peak: docs/scale.md)."""
    trim_large(tl.n_events)


@dataclass(frozen=True)
class Facts:
    """A file's ranks' first-round parts (``parts.rank_facts``; ranks with GPU work);
    ``whatif``: the what-if's drop rule, when its reductions are made too (``callsite``:
    at that call site only, ``--drop-at`` resolved); ``sites``: the rule whose sync call
    sites each rank counts instead (``--drop-at`` before it is resolved: the reductions
    come in a round of their own, :func:`_resolved`)."""

    whatif: str | None = None
    callsite: str | None = None
    sites: str | None = None

    def __call__(self, timelines: list[Timeline]) -> list[RankFacts]:
        out = []
        for tl in timelines:
            if not tl.n_gpu:
                continue
            f = rank_facts(tl)
            if self.sites is not None:
                f.sites = site_counts(tl, self.sites)
            if self.whatif is not None:
                _trim(tl)
                f.whatif = _guarded(rounds.rank_reductions, tl, self.whatif, f.view.op_index,
                                    self.callsite)
            out.append(f)
        return out


def first_round(drop: DropSpec | None) -> Facts:
    """The first round's part of a report whose what-if runs where the ranks are read with
    ``drop`` (None: no what-if): its reductions, or with ``--drop-at`` the call sites it is
    resolved over."""
    if drop is None:
        return Facts()
    if drop.callsite is not None:
        return Facts(sites=drop.kinds)
    return Facts(drop.kinds)


PartOut = tuple[int, "RankPart | None", object, "LaneRow | None"]


@dataclass(frozen=True)
class Parts:
    """A file's ranks' second-round parts: (rank, ``parts.RankPart`` or None, its what-if
    result, its failure's line, or None, its swimlane row or None) per rank asked;
    ``lane``: the swimlane's windows, when a page draws it (the task then computes, or
    loads from the cache, the stall analyses: the row's idle gaps)."""

    asks: tuple[RankAsk, ...]
    whatifs: tuple[rounds.WhatIfAsk, ...] = ()
    lane: LaneAsk | None = None

    @property
    def takes_stalls(self) -> bool:
        return self.lane is not None

    def __call__(self, timelines: list[Timeline], stalls: list[RankResult] | None = None
                 ) -> list[PartOut]:
        by_rank = {a.rank: a for a in self.asks}
        wi = {a.rank: a for a in self.whatifs}
        spans = self._spans(timelines, by_rank, stalls or [])
        if stalls:
            stalls.clear()  # each rank's gaps in its row's span are all the row needs
        out: list[PartOut] = []
        for tl in timelines:
            if tl.rank not in by_rank and tl.rank not in wi:
                continue
            # the what-if first: its big arrays on a heap that the cross-rank part's many
            # small objects have not cut up yet (a lower worker peak)
            whatif = _guarded(rounds.rank_whatif, tl, wi[tl.rank]) if tl.rank in wi else None
            _trim(tl)
            part = row = None
            if tl.rank in by_rank:
                ask = by_rank[tl.rank]
                part = rank_part(tl, ask)
                if tl.rank in spans and self.lane is not None:
                    span, gaps = spans[tl.rank]
                    row = lane_row(tl, _offset(ask), part.bubbles, gaps, part.drain.queue,
                                   self.lane, span)
                part = travelled(part)
            out.append((tl.rank, part, whatif, row))
        return out

    def _spans(self, timelines: list[Timeline], by_rank: dict[int, RankAsk],
               stalls: list[RankResult]) -> dict[int, tuple[tuple[np.ndarray, int, int],
                                                        tuple[np.ndarray, ...]]]:
        """Per rank asked for a swimlane row: its span (``lanes.lane_span``) and its gaps
        there (from its stall analysis)."""
        gaps = {s.rank: s.gaps for s in stalls}
        out = {}
        for tl in timelines:
            if self.lane is None or tl.rank not in by_rank or tl.rank not in gaps:
                continue
            off = _offset(by_rank[tl.rank])
            span = lane_span(tl, off, self.lane)
            out[tl.rank] = (span, gaps_in(gaps[tl.rank], off, span[1], span[2]))
        return out


def _offset(ask: RankAsk) -> int:
    """The rank's clock offset to the aligned clock (ns)."""
    return int(ask.m.offset_ns[ask.pos])


def applies(facts: Sequence[RankFacts]) -> bool:
    """``analysis.applies`` from the facts: two ranks with GPU work, a NCCL kernel."""
    return len(facts) >= 2 and any(f.view.op_index.size for f in facts)


Outcome = tuple[object, str | None]  # (result or None, its warning line or None)


@dataclass
class RoundsResults:
    """The run-level results made where the ranks are read, each as ``(result, warning)``;
    ``fallback``: the what-if needs the run in one process after all (a cycle), nothing
    was made."""

    cross: Outcome = (None, None)
    whatif: Outcome = (None, None)
    fallback: bool = False


def _start_of(facts: Sequence[RankFacts]):  # type: ignore[no-untyped-def]
    def start_of(pos: int, ops: np.ndarray) -> np.ndarray:
        v = facts[pos].view
        return v.tl.gpu_start_ns[np.searchsorted(v.op_index, ops)]
    return start_of


def run_rounds(facts: Sequence[RankFacts], tasks: dict[int, RankTask], backend: Backend,
                  options: StallOptions, all_ranks: list[int], *, cross: bool = True,
                  drop: DropSpec | None = None, n_events: int = 0,
                  cycle_falls_back: bool = False, lanes: bool = False) -> RoundsResults:
    """The cross-rank analysis (``cross``) and the what-if (``drop``: its rule; None: not
    run) from the first round's ``facts`` (every rank with GPU work); ``tasks``: per rank,
    the task that read it; ``all_ranks``: every rank read; ``n_events``: the run's API
    calls + GPU ops; ``cycle_falls_back``: a what-if whose joined graph has a cycle asks for
    the run in one process (``RoundsResults.fallback``) rather than warning; ``lanes``: the
    cross-rank analysis with its swimlane (a page: each rank's row made on its worker)."""
    t0 = time.perf_counter()
    out = RoundsResults()
    facts = sorted(facts, key=lambda f: f.rank)
    cross = cross and applies(facts)
    wants_whatif = drop is not None and bool(facts)
    if not cross and not wants_whatif:
        return out
    m = match_views([f.view for f in facts])
    p = None
    if cross:
        try:
            p = plan(facts, int(options.tolerance_ns), m)
        except ProfplugError as exc:
            out.cross = (None, failure("cross-rank analysis", exc))
    wp = None
    if wants_whatif and drop is not None and drop.callsite is not None and \
            any(f.sites is not None for f in facts):
        facts, drop, out.whatif = _resolved(facts, tasks, backend, drop)
    if wants_whatif and drop is not None:
        try:
            wp, failed = _whatif_plan(facts, m, p, drop, options)
        except ProfplugError as exc:
            if cycle_falls_back:
                out.fallback = True
                return out
            wp, failed = None, failure(WHATIF_LABEL, exc)
        if failed is not None:
            out.whatif = (None, failed)
    if p is None and wp is None:
        return out
    _second_round(out, p, wp, facts, tasks, backend, all_ranks, n_events, t0, lanes)
    return out


def _whatif_plan(facts: list[RankFacts], m: object, p: Plan | None, drop: DropSpec,
                 options: StallOptions) -> tuple[rounds.WhatIfPlan | None, str | None]:
    """The what-if's plan from the ranks' reductions, or the line saying why there is none
    (a rank's reduction failed or did not come back); a ProfplugError from the joined
    graph's solve (a cycle) goes to the caller."""
    reds = [f.whatif for f in facts]
    bad = next((r for r in reds if isinstance(r, str)), None)
    if bad is not None or any(r is None for r in reds):
        return None, bad or "what-if: a rank's reduction did not come back"
    ops = [f.view.op_index for f in facts]
    parts = [a.partners for a in p.asks] if p is not None else partners(m, _start_of(facts))
    wp = rounds.plan(reds, m, parts, ops,  # type: ignore[arg-type]
                     [f.view.tl.gpu_start_ns for f in facts],
                     [f.view.tl.gpu_end_ns for f in facts], drop, options)
    return wp, None


def _second_round(out: RoundsResults, p: Plan | None, wp: rounds.WhatIfPlan | None,
                  facts: list[RankFacts],
                  tasks: dict[int, RankTask], backend: Backend, all_ranks: list[int],
                  n_events: int, t0: float, lanes: bool) -> None:
    """Round two: each file's ranks' asks sent to where the file is read, the parts back,
    and the results joined into ``out``."""
    by_file: dict[int, tuple[list[RankAsk], list[rounds.WhatIfAsk]]] = defaultdict(
        lambda: ([], []))
    for ask in p.asks if p is not None else []:
        by_file[tasks[ask.rank].index][0].append(ask)
    for wa in wp.asks if wp is not None else []:
        by_file[tasks[wa.rank].index][1].append(wa)
    first = {t.index: t for t in tasks.values()}
    lane = lane_ask([(lo, hi) for _, lo, hi, _, _ in p.walks]) if lanes and p else None
    second = [replace(first[i], stall=None if lane is None or not a else first[i].stall,
                      keep_timeline=False, keep_gaps=False, send_stalls=False,
                      extra=Parts(tuple(a), tuple(w), lane if a else None))
              for i, (a, w) in sorted(by_file.items())]
    try:
        results = gather(second, backend)
    except ProfplugError as exc:  # a trace that changed or went since the first round
        why = f"not run: {exc}"
        if p is not None:
            out.cross = (None, f"cross-rank analysis {why}")
        if wp is not None:
            out.whatif = (None, f"{WHATIF_LABEL} {why}")
        return
    got: dict[int, tuple[RankPart | None, object]] = {}
    rows: dict[int, LaneRow | None] = {}
    for r in results:
        for rank, part, wi, row in r.extra or []:  # type: ignore[attr-defined]
            got[rank] = (part, wi)
            rows[rank] = row
    lost = next((r.lost for r in results if r.lost), "no part came back")
    if p is not None:
        out.cross = _cross(p, facts, got, lost, all_ranks, t0, lane, rows)
    if wp is not None:
        out.whatif = _whatif(wp, facts, got, lost, all_ranks, n_events)


def _resolved(facts: list[RankFacts], tasks: dict[int, RankTask], backend: Backend,
              drop: DropSpec) -> tuple[list[RankFacts], DropSpec | None, Outcome]:
    """``--drop-at``: its call site resolved over the ranks' sync call sites (the facts', in
    rank order), then each rank's reductions made with it in a round of their own (a load
    from the per-rank cache): the facts with them and the rule; or, when the name picks out
    no call site or several, no rule and the what-if's one-line failure."""
    try:
        rule = rounds.resolved_at(drop, [f.sites for f in facts])  # type: ignore[misc]
    except ProfplugError as exc:
        return facts, None, (None, failure(WHATIF_LABEL, exc))
    files = {t.index: t for t in tasks.values()}
    again = [replace(t, stall=None, keep_timeline=False, keep_gaps=False, send_stalls=False,
                     extra=Facts(rule.kinds, rule.callsite)) for _, t in sorted(files.items())]
    try:
        results = gather(again, backend)
    except ProfplugError as exc:  # a trace that changed or went since the first round
        return facts, None, (None, f"{WHATIF_LABEL} not run: {exc}")
    made = {f.rank: f.whatif for r in results for f in r.extra or []}  # type: ignore[attr-defined]
    return [replace(f, whatif=made.get(f.rank)) for f in facts], rule, (None, None)


def _cross(p: Plan, facts: Sequence[RankFacts], got: dict[int, tuple[RankPart | None, object]],
           lost: str, all_ranks: list[int], t0: float, lane: LaneAsk | None,
           rows: dict[int, LaneRow | None]) -> Outcome:
    missing = [f.rank for f in facts if got.get(f.rank, (None, None))[0] is None]
    if missing:
        return None, f"cross-rank analysis not run: ranks {missing}: {lost}"
    parts: list[RankPart] = [got[f.rank][0] for f in facts]  # type: ignore[misc]
    paths = join(p, parts)
    lane_rows = [rows.get(f.rank) for f in facts]
    sw = None if lane is None or any(r is None for r in lane_rows) else \
        joined_lanes(lane_rows, lane, p.m, [x.bubbles for x in parts], paths)  # type: ignore[arg-type]
    return joined(p, parts, paths, all_ranks, sw, t0), None


def _whatif(wp: rounds.WhatIfPlan, facts: Sequence[RankFacts],
            got: dict[int, tuple[RankPart | None, object]], lost: str, all_ranks: list[int],
            n_events: int) -> tuple[WhatIfResult | None, str | None]:
    t0 = time.perf_counter() - wp.solve_s
    res = {rank: wi for rank, (_, wi) in got.items()}
    bad = next((w for w in res.values() if isinstance(w, str)), None)
    if bad is not None:
        return None, bad
    missing = [f.rank for f in facts if not isinstance(res.get(f.rank), RankWhatIf)]
    if missing:
        return None, f"{WHATIF_LABEL} not run: ranks {missing}: {lost}"
    order = {r: i for i, r in enumerate(all_ranks)}
    ranks = sorted((res[f.rank] for f in facts), key=lambda r: order.get(r.rank, 0))
    sizes = [w for f in facts if (w := getattr(f.whatif, "world_size", None)) is not None]
    comm = any(bool(f.view.op_index.size) for f in facts)
    return rounds.joined(wp, ranks, all_ranks, sizes, comm, n_events, t0), None  # type: ignore[arg-type]
