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
from collections.abc import Callable
from typing import Any

from ...errors import ProfplugError
from ..classify import comm_for_symbols
from ..stalls import RankStalls, StallOptions, analyze_rank
from ..steps import step_spans
from ..timeline import Timeline, launch_times, launch_tops
from . import critical as cp
from .bubbles import bindings, rank_bubbles
from .drain import rank_drain
from .matching import RULES, match
from .result import CriticalPath, CrossRankResult, us
from .swimlane import swimlane

TOP_CALLSITES = 5


def cross_rank(timelines: list[Timeline], options: StallOptions | None = None,
               ranks: list[RankStalls] | None = None) -> CrossRankResult:
    """The cross-rank analysis of one run (every rank's timeline).

    ``ranks``: the stall analysis of the same timelines, when the caller has it (a report);
    it gives the idle gaps' causes for the swimlane.
    """
    opt = options or StallOptions()
    t0 = time.perf_counter()
    tls = [tl for tl in timelines if tl.n_gpu]
    m = match(tls)
    if m.clock_refused:  # ranks that cannot be put on one time axis (clocks.py)
        raise ProfplugError(f"cross-rank analysis not run: {m.clock_refused}")
    binds = bindings(tls, m)
    spans = [step_spans(tl, launch_times(tl, launch_tops(tl))) for tl in tls]
    bub = [rank_bubbles(tl, i, m, binds[i], spans[i]) for i, tl in enumerate(tls)]
    drains = [rank_drain(tl, spans[i]) for i, tl in enumerate(tls)]
    paths, basis = cp.critical_paths(tls, m, spans, int(opt.tolerance_ns))
    crit = _summary(tls, m.ranks, paths, basis)
    if ranks is None:
        stalls = [analyze_rank(tl, opt) for tl in tls]
    else:
        by_rank = {r.rank: r for r in ranks}
        stalls = [by_rank.get(tl.rank) or analyze_rank(tl, opt) for tl in tls]
    sw = swimlane(tls, m, bub, stalls, paths, drains)
    matching = {
        "rules": {r: m.rule_counts[r] for r in RULES if m.rule_counts.get(r)},
        "p2p_pairs": int((m.e_dir == 1).sum()),
        "collectives": sum(v for k, v in m.rule_counts.items() if k.startswith("collective")),
        "unmatched_kernels": {str(r): n for r, n in zip(m.ranks, m.unmatched, strict=True)},
        "clock": {"rule": m.clock_rule,
                  "offsets_us": {str(r): us(int(o)) for r, o in
                                 zip(m.ranks, m.offset_ns.tolist(), strict=True)}}}
    skipped = [tl.rank for tl in timelines if not tl.n_gpu]
    warnings = list(m.warnings)
    notes = list(m.notes)
    if skipped:
        warnings.append(f"ranks without GPU work left out: {skipped}")
    if len(tls) < 2:  # true of the run: "one rank" only when it has one rank
        who = ("one rank" if len(timelines) < 2 else
               f"{len(timelines)} ranks, {len(tls)} with GPU work")
        notes.append(f"{who}: no NCCL kernel to match across ranks; the bubble is the idle "
                     "time and the critical path stays on one rank's GPU and host")
    return CrossRankResult(ranks=m.ranks, matching=matching, bubbles=bub, drains=drains,
                           critical_path=crit, notes=notes, warnings=warnings,
                           swimlane=sw, analysis_s=time.perf_counter() - t0)


def _shares(d: dict[Any, int], total: int) -> dict[str, float]:
    return {str(k): round(v / total, 4) if total else 0.0 for k, v in d.items()}


def _summary(tls: list[Timeline], ranks: list[int], paths: list[cp.StepPath], basis: str
             ) -> CriticalPath:
    sites = cp.call_sites(tls, paths)
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
                      "by_category": _shares({cp.CATEGORIES[i]: c[i]
                                              for i in range(len(cp.CATEGORIES))}, tot),
                      "by_rank": _shares(dict(sorted(r.items())), tot),
                      "top_rank": max(r, key=lambda x: (r[x], -x)) if r else None})
    total = sum(cat_ns.values())
    top = [{"rank": rk, "callsite": site, "category": cp.CATEGORIES[cat],
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
        by_category=_shares({cp.CATEGORIES[i]: cat_ns[i]
                             for i in range(len(cp.CATEGORIES))}, total),
        by_rank=_shares(dict(sorted(rank_ns.items())), total),
        top_rank=max(rank_ns, key=lambda x: (rank_ns[x], -x)) if rank_ns else None,
        top_callsites=top, steps=steps)


def applies(timelines: list[Timeline]) -> bool:
    """Whether a run has anything to match across ranks: two ranks or more with GPU work,
    and a NCCL (RCCL) kernel among them. O(GPU ops), no sort."""
    tls = [tl for tl in timelines if tl.n_gpu]
    return len(tls) >= 2 and any(bool(comm_for_symbols(tl.names)[tl.gpu_name].any())
                                 for tl in tls)


def cross_rank_analysis() -> Callable[..., CrossRankResult | None]:
    """:func:`cross_rank` as a run-level analysis: ``analyze(paths,
    run=[cross_rank_analysis()])`` puts its result in ``Report.run["cross_rank"]``. It takes
    the report's stall analyses (``uses_rank_stalls``) rather than redoing them. A run it
    cannot apply to (:func:`applies`: one rank, or no NCCL kernel) is skipped: no
    ``cross_rank`` key, no cost (``benchmarks/bench_analyzer.py`` measures both)."""
    def run(timelines: list[Timeline], options: StallOptions,
            ranks: list[RankStalls] | None = None) -> CrossRankResult | None:
        if not applies(timelines):
            return None
        return cross_rank(timelines, options, ranks)

    run.uses_rank_stalls = True  # type: ignore[attr-defined]
    return run
