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
from typing import Any

from profplug.analyzers.core.analysis_spec import CROSS_RANK, AnalysisSpec
from profplug.analyzers.core.classify import comm_for_symbols
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.crossrank import critical
from profplug.analyzers.crossrank.per_rank import (
    Plan,
    RankPart,
    asked_graph,
    chain_labels,
    join,
    plan,
    rank_facts,
    rank_part,
    site_labels,
)
from profplug.analyzers.crossrank.result import CriticalPath, CrossRankResult, us
from profplug.analyzers.crossrank.swimlane import Swimlane, swimlane
from profplug.analyzers.graph.matching import RULES, match
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank

TOP_CALLSITES = 5


def cross_rank(timelines: list[Timeline], options: StallOptions | None = None,
               ranks: list[RankResult] | None = None) -> CrossRankResult:
    """The cross-rank analysis of one run (every rank's timeline), in this process: each
    rank's parts (``parts``) in turn, then joined.

    ``ranks``: the stall analysis of the same timelines, when the caller has it (a report);
    it gives the idle gaps' causes for the swimlane.
    """
    opt = options or StallOptions()
    t0 = time.perf_counter()
    tls = [tl for tl in timelines if tl.n_gpu]
    facts = [rank_facts(tl) for tl in tls]
    # the timelines' own matching: a report's what-if matched them already (matches_kept)
    p = plan(facts, int(opt.tolerance_ns), match(tls))
    parts = [rank_part(tl, ask) for tl, ask in zip(tls, p.asks, strict=True)]

    def extend(pos: int, v: int, lo: int) -> None:  # a walk no entry foresaw
        parts[pos].chain.trace(asked_graph(tls[pos], p.asks[pos]), v, lo)
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
             basis: Basis) -> CriticalPath:
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
        basis=basis, n_steps=len(paths) if basis == Basis.STEP else 0, length_us=us(total),
        by_category=_shares({critical.CATEGORIES[i]: cat_ns[i]
                             for i in range(len(critical.CATEGORIES))}, total),
        by_rank=_shares(dict(sorted(rank_ns.items())), total),
        top_rank=max(rank_ns, key=lambda x: (rank_ns[x], -x)) if rank_ns else None,
        top_callsites=top, steps=steps)


def applies(timelines: list[Timeline]) -> bool:
    """Whether a run has anything to match across ranks: two ranks or more with GPU work,
    and a NCCL (RCCL) kernel among them. O(GPU ops), no sort."""
    tls = [tl for tl in timelines if tl.n_gpu]
    return len(tls) >= 2 and any(bool(comm_for_symbols(tl.names)[tl.gpu_name].any())
                                 for tl in tls)


def _run(timelines: list[Timeline], options: StallOptions,
         ranks: list[RankResult] | None) -> CrossRankResult | None:
    """:func:`cross_rank`, or None for a run it does not apply to (:func:`applies`)."""
    return cross_rank(timelines, options, ranks) if applies(timelines) else None


# ``analyze(paths, run=[CROSS_RANK_SPEC])`` puts its result in ``Report.run["cross_rank"]``.
# It takes the report's stall analyses rather than redoing them. A run it cannot apply to
# (:func:`applies`: one rank, or no NCCL kernel) is skipped: no ``cross_rank`` key, no cost
# (``benchmarks/bench_analyzer.py`` measures both). Its parts can run where the ranks are
# read (``scale.run_level``).
CROSS_RANK_SPEC = AnalysisSpec(name="cross_rank", label="cross-rank analysis", run=_run,
                               cache_key="cross_rank", in_rounds=CROSS_RANK)


def cross_rank_analysis() -> AnalysisSpec:
    """The cross-rank analysis as a run-level analysis of a report (:data:`CROSS_RANK_SPEC`)."""
    return CROSS_RANK_SPEC
