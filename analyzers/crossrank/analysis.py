"""Cross-rank analysis, end to end: match, bubbles, critical path, drain, swimlane.

``cross_rank(timelines)`` matches the NCCL kernels of all ranks (``matching``), splits each
rank's NCCL time into transfer and peer wait (``bubbles``), walks each step's critical path
across ranks (``critical``), measures the host lead and launch-queue depth (``drain``), and
keeps the plot data of a few steps (``swimlane``). ``cross_rank_analysis()`` is the same as a
run-level analysis of a report (``Report.run["cross_rank"]``).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from profplug.analyzers.core.analysis_spec import AnalysisSpec, Asks, Done, FirstPart, Next
from profplug.analyzers.core.classify import comm_for_symbols
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.optional import Ok, Outcome, TaskError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank import critical
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
    asked_graph,
    chain_labels,
    join,
    plan,
    rank_ends,
    rank_facts,
    rank_part,
    site_labels,
    travelled,
)
from profplug.analyzers.crossrank.result import CriticalPath, CrossRankResult, us
from profplug.analyzers.crossrank.swimlane import Swimlane, joined_lanes, swimlane
from profplug.analyzers.graph.matching import RULES, match
from profplug.analyzers.graph.run_views import RunViews
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank

TOP_CALLSITES = 5


def cross_rank(timelines: list[Timeline], options: StallOptions | None = None,
               ranks: list[RankResult] | None = None, memo: Memo | None = None
               ) -> CrossRankResult:
    """The cross-rank analysis of one run (every rank's timeline), in this process: each
    rank's parts (``parts``) in turn, then joined.

    ``ranks``: the stall analysis of the same timelines, when the caller has it (a report);
    it gives the idle gaps' causes for the swimlane. ``memo``: the caller's (``core.memo``;
    a report's, shared with its what-if: the matching, launch calls and kinds once).
    """
    opt = options or StallOptions()
    memo = memo or Memo()
    t0 = time.perf_counter()
    tls = [tl for tl in timelines if tl.n_gpu]
    facts = [rank_facts(tl, memo) for tl in tls]
    # the timelines' own matching: a report's what-if matched them already (in its memo)
    p = plan(facts, int(opt.tolerance_ns), match(tls, memo))
    parts = [rank_part(tl, ask, memo) for tl, ask in zip(tls, p.asks, strict=True)]

    def extend(pos: int, v: int, lo: int) -> None:  # a walk no entry foresaw
        parts[pos].chain.trace(asked_graph(tls[pos], p.asks[pos], memo), v, lo)
        parts[pos].labels.update(chain_labels(tls[pos], parts[pos].chain))

    paths = join(p, parts, extend)
    if ranks is None:
        stalls = [analyze_rank(tl, opt) for tl in tls]
    else:
        by_rank = {r.rank: r for r in ranks}
        stalls = [by_rank.get(tl.rank) or analyze_rank(tl, opt) for tl in tls]
    sw = swimlane(tls, p.m, [x.bubbles for x in parts], stalls, paths,
                  [x.drain for x in parts])
    return joined(p, parts, paths, [tl.rank for tl in timelines], sw, t0)


def joined(p: Plan, parts: list[RankPart], paths: list[critical.StepPath], all_ranks: list[int],
           sw: Swimlane | None, t0: float) -> CrossRankResult:
    """The result from the plan, the ranks' parts and the replayed walks; ``all_ranks``:
    every rank of the run (those without GPU work are left out, and said so)."""
    m = p.m
    crit = _summary(site_labels(parts), m.ranks, paths, p.basis)
    matching = {
        "rules": {r: m.rule_counts[r] for r in RULES if m.rule_counts.get(r)},
        "p2p_pairs": int((m.e_dir == 1).sum()),
        "collectives": sum(v for k, v in m.rule_counts.items() if k.startswith("collective")),
        "unmatched_kernels": {str(r): n for r, n in zip(m.ranks, m.unmatched, strict=True)},
        "clock": {"rule": m.clock_rule,
                  "offsets_us": {str(r): us(int(o)) for r, o in
                                 zip(m.ranks, m.offset_ns.tolist(), strict=True)}}}
    skipped = [r for r in all_ranks if r not in set(m.ranks)]
    warnings = list(m.warnings)
    notes = list(m.notes)
    if skipped:
        warnings.append(f"ranks without GPU work left out: {skipped}")
    if len(m.ranks) < 2:  # true of the run: "one rank" only when it has one rank
        who = ("one rank" if len(all_ranks) < 2 else
               f"{len(all_ranks)} ranks, {len(m.ranks)} with GPU work")
        notes.append(f"{who}: no NCCL kernel to match across ranks; the bubble is the idle "
                     "time and the critical path stays on one rank's GPU and host")
    return CrossRankResult(ranks=m.ranks, matching=matching,
                           bubbles=[x.bubbles for x in parts], drains=[x.drain for x in parts],
                           critical_path=crit, notes=notes, warnings=warnings,
                           swimlane=sw, analysis_s=time.perf_counter() - t0, matched=m,
                           paths=paths)


def _shares(d: dict[Any, int], total: int) -> dict[str, float]:
    return {str(k): round(v / total, 4) if total else 0.0 for k, v in d.items()}


def _summary(sites: dict[tuple[int, int], str], ranks: list[int], paths: list[critical.StepPath],
             basis: str) -> CriticalPath:
    cat_ns: Counter[int] = Counter()
    rank_ns: Counter[int] = Counter()
    site_ns: Counter[tuple[int, str, int]] = Counter()
    site_steps: dict[tuple[int, str, int], set[int]] = defaultdict(set)
    steps = []
    for k, p in enumerate(paths):
        c: Counter[int] = Counter()
        r: Counter[int] = Counter()
        for s in p.segments:
            d = s.end - s.start
            c[s.cat] += d
            r[ranks[s.pos]] += d
            key = (ranks[s.pos], sites.get((s.pos, s.call), "-"), s.cat)
            site_ns[key] += d
            site_steps[key].add(k)
        cat_ns.update(c)
        rank_ns.update(r)
        tot = sum(c.values())
        steps.append({"step": p.step, "span_us": us(p.hi_ns - p.lo_ns), "length_us": us(tot),
                      "by_category": _shares({critical.CATEGORIES[i]: c[i]
                                              for i in range(len(critical.CATEGORIES))}, tot),
                      "by_rank": _shares(dict(sorted(r.items())), tot),
                      "top_rank": max(r, key=lambda x: (r[x], -x)) if r else None})
    total = sum(cat_ns.values())
    top = [{"rank": rk, "callsite": site, "category": critical.CATEGORIES[cat],
            "share": round(v / total, 4) if total else 0.0,
            "steps": len(site_steps[(rk, site, cat)])}
           for (rk, site, cat), v in site_ns.most_common(TOP_CALLSITES)]
    return CriticalPath(
        definition=("walk back from each step's last GPU op end through what bound it: the "
                    "stream predecessor, the launching host call (then the host thread back "
                    "to its last blocking sync, then the op that sync waited for), a stream "
                    "wait, or the matched peer kernel's start (a NCCL kernel's wait is slack)"
                    "; docs/crossrank.md"),
        basis=basis, n_steps=len(paths) if basis == "step" else 0, length_us=us(total),
        by_category=_shares({critical.CATEGORIES[i]: cat_ns[i]
                             for i in range(len(critical.CATEGORIES))}, total),
        by_rank=_shares(dict(sorted(rank_ns.items())), total),
        top_rank=max(rank_ns, key=lambda x: (rank_ns[x], -x)) if rank_ns else None,
        top_callsites=top, steps=steps)


def applies(timelines: list[Timeline], memo: Memo | None = None) -> bool:
    """Whether a run has anything to match across ranks: two ranks or more with GPU work,
    and a NCCL (RCCL) kernel among them. O(GPU ops), no sort."""
    tls = [tl for tl in timelines if tl.n_gpu]
    return len(tls) >= 2 and any(bool(comm_for_symbols(tl.names, memo)[tl.gpu_name].any())
                                 for tl in tls)


def _run(timelines: list[Timeline], options: StallOptions,
         ranks: list[RankResult] | None, memo: Memo) -> CrossRankResult | None:
    """:func:`cross_rank`, or None for a run it does not apply to (:func:`applies`)."""
    return cross_rank(timelines, options, ranks, memo) if applies(timelines, memo) else None


LABEL = "cross-rank analysis"  # what its warnings call it


@dataclass(frozen=True)
class CrossPart:
    """A rank's second-round step (where it is read): its ``per_rank.RankPart`` as it
    travels, and with ``lane`` (a page draws the swimlane) its row, from its idle gaps."""

    ask: RankAsk
    lane: LaneAsk | None = None

    @property
    def needs_stalls(self) -> bool:
        return self.lane is not None

    def __call__(self, tl: Timeline, stall: RankResult | None
                 ) -> tuple[RankPart, LaneRow | None]:
        part = rank_part(tl, self.ask)
        row = None
        if self.lane is not None and stall is not None:
            off = int(self.ask.m.offset_ns[self.ask.pos])  # its offset to the aligned clock
            span = lane_span(tl, off, self.lane)
            row = lane_row(tl, off, part.bubbles, gaps_in(stall.gaps, off, span[1], span[2]),
                           part.drain.queue, self.lane, span)
        return travelled(part), row


@dataclass(frozen=True)
class CrossRankRounds:
    """The cross-rank analysis in rounds where the ranks are read (``per_rank``: facts,
    plan, parts, join); ``core.analysis_spec.RoundsCapability``."""

    big_runs_only = False

    def first_part(self) -> FirstPart:
        return rank_ends

    def plan(self, run: RunViews, firsts: dict[int, Outcome]) -> Next:
        t0 = time.perf_counter()
        if len(run.views) < 2 or not any(v.op_index.size for v in run.views):
            return Done()  # :func:`applies`: two ranks with GPU work, a NCCL kernel
        bad = next((e for e in firsts.values() if isinstance(e, TaskError)), None)
        if bad is not None:
            return Done(None, TaskError(bad.kind, bad.line(LABEL)))
        ends = {r: v.value for r, v in firsts.items() if isinstance(v, Ok)}
        facts = [RankFacts(v.rank, v, ends[v.rank]) for v in run.views]
        try:
            p = plan(facts, int(run.options.tolerance_ns), run.matching, run.partners)
        except ProfplugError as exc:
            return Done(None, TaskError.of(exc))
        lane = lane_ask([(lo, hi) for _, lo, hi, _, _ in p.walks]) if run.keep_gaps else None
        return Asks({a.rank: CrossPart(a, lane) for a in p.asks},
                    lambda values, lost: _joined_parts(p, run, values, lost, lane, t0))


def _joined_parts(p: Plan, run: RunViews, values: dict[int, Outcome], lost: str,
                  lane: LaneAsk | None, t0: float) -> Done:
    """The result from the ranks' second-round parts, or the line saying why there is none."""
    bad = next((e for e in values.values() if isinstance(e, TaskError)), None)
    if bad is not None:
        return Done(None, TaskError(bad.kind, bad.line(LABEL)))
    got = {rank: v.value for rank, v in values.items() if isinstance(v, Ok)}
    missing = [rank for rank in run.ranks if got.get(rank) is None]
    if missing:
        return Done(None, TaskError.declined(f"{LABEL} not run: ranks {missing}: {lost}"))
    parts: list[RankPart] = [got[rank][0] for rank in run.ranks]
    paths = join(p, parts)
    rows = [got[rank][1] for rank in run.ranks]
    sw = None if lane is None or any(r is None for r in rows) else \
        joined_lanes(rows, lane, p.m, [x.bubbles for x in parts], paths)
    return Done(joined(p, parts, paths, run.all_ranks, sw, t0))


# ``analyze(paths, run=[CROSS_RANK_SPEC])`` puts its result in ``Report.run``, under its key.
# It takes the report's stall analyses rather than redoing them. A run it cannot apply to
# (:func:`applies`: one rank, or no NCCL kernel) is skipped: no key, no cost
# (``benchmarks/bench_analyzer.py`` measures both). It runs in rounds where the ranks are
# read on big runs (``scale.run_level``).
CROSS_RANK_SPEC = AnalysisSpec(name=CrossRankResult.key, label=LABEL, run=_run,
                               cache_key=CrossRankResult.key, rounds=CrossRankRounds(),
                               aligns_clocks=True)


def cross_rank_analysis() -> AnalysisSpec:
    """The cross-rank analysis as a run-level analysis of a report (:data:`CROSS_RANK_SPEC`)."""
    return CROSS_RANK_SPEC
