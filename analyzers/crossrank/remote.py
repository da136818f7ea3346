"""The cross-rank analysis where the ranks are read: its per-rank parts (``parts``) run on
the workers in two rounds, and the client joins them (docs/scale.md, "What runs where").

Round one rides on the report's own read (``dispatch.RankTask.extra`` = :class:`Facts`):
each worker sends back, with its ranks' stall analyses, their matching inputs and step
ends. The client plans (matches, picks the walks) and sends each file one task
(:class:`Parts`) with its ranks' asks; the worker reads the file again (through the per-rank
cache when there is one) and sends back each rank's bubbles, drain figures, recorded walk
steps and their call sites. The client holds no rank's timeline.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...errors import ProfplugError
from ..dispatch import Backend, RankTask, gather
from ..timeline import Timeline
from .analysis import joined
from .parts import RankAsk, RankFacts, RankPart, join, plan, rank_facts, rank_part, travelled
from .result import CrossRankResult


@dataclass(frozen=True)
class Facts:
    """A file's ranks' first-round parts (``parts.rank_facts``; ranks with GPU work)."""

    def __call__(self, timelines: list[Timeline]) -> list[RankFacts]:
        return [rank_facts(tl) for tl in timelines if tl.n_gpu]


@dataclass(frozen=True)
class Parts:
    """A file's ranks' second-round parts: (rank, ``parts.RankPart``) per rank asked."""

    asks: tuple[RankAsk, ...]

    def __call__(self, timelines: list[Timeline]) -> list[tuple[int, RankPart]]:
        by_rank = {a.rank: a for a in self.asks}
        return [(tl.rank, travelled(rank_part(tl, by_rank[tl.rank]))) for tl in timelines
                if tl.rank in by_rank]


def applies(facts: Sequence[RankFacts]) -> bool:
    """``analysis.applies`` from the facts: two ranks with GPU work, a NCCL kernel."""
    return len(facts) >= 2 and any(f.view.op_index.size for f in facts)


def cross_rank_remote(facts: Sequence[RankFacts], tasks: dict[int, RankTask],
                      backend: Backend, tol: int, all_ranks: list[int]
                      ) -> CrossRankResult | None:
    """The cross-rank analysis from the first round's ``facts`` (every rank with GPU work);
    ``tasks``: per rank, the task that read it (its file); ``all_ranks``: every rank read.
    None where it does not apply (as ``cross_rank_analysis``)."""
    t0 = time.perf_counter()
    facts = sorted(facts, key=lambda f: f.rank)
    if not applies(facts):
        return None
    p = plan(facts, tol)
    by_file: dict[int, list[RankAsk]] = defaultdict(list)
    for ask in p.asks:
        by_file[tasks[ask.rank].index].append(ask)
    first = {t.index: t for t in tasks.values()}
    second = [replace(first[i], stall=None, keep_timeline=False, keep_gaps=False,
                      extra=Parts(tuple(asks))) for i, asks in sorted(by_file.items())]
    try:
        results = gather(second, backend)
    except ProfplugError as exc:  # a trace that changed or went since the first round
        raise ProfplugError(f"cross-rank analysis not run: {exc}") from None
    got: dict[int, RankPart] = {}
    for r in results:
        got.update(dict(r.extra or []))  # type: ignore[call-overload]
    missing = [f.rank for f in facts if f.rank not in got]
    if missing:
        why = next((r.lost for r in results if r.lost), "no part came back")
        raise ProfplugError(f"cross-rank analysis not run: ranks {missing}: {why}")
    parts = [got[f.rank] for f in facts]
    return joined(p, parts, join(p, parts), all_ranks, None, t0)
