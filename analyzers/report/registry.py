"""The run-level analyses a report runs: one line each in :data:`REGISTRY`, in the order of
their keys in the JSON report.

Each line names an analysis and makes its spec (``core.analysis_spec.AnalysisSpec``) from
what the command asked (:class:`Asked`: ``--whatif``/``--no-whatif``, ``--no-cross-rank``,
``--drop``); None leaves it out. The report runs the specs the same way in one process, on
the local pool and on a Dask cluster (``report.analysis.analyze``): adding an analysis is its
module and one line here (docs/architecture.md, "Adding an analysis").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from profplug.analyzers.core.analysis_spec import WHATIF, AnalysisSpec
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank.analysis import CROSS_RANK_SPEC
from profplug.analyzers.graph.dropset import DROP_ALL, DROP_DEVICE, DROP_POLICY, DropSpec
from profplug.analyzers.stalls.hostonly import HOST_ONLY_SPEC
from profplug.analyzers.stalls.rank import RankResult, StallOptions
from profplug.analyzers.whatif.predict import whatif, whatif_analysis
from profplug.analyzers.whatif.result import WhatIfResult

DROPS = (DROP_POLICY, DROP_DEVICE, DROP_ALL)
WHATIF_AUTO_MAX_EVENTS = 2_000_000  # a report's default what-if: ~2 us/event, a few seconds


@dataclass(frozen=True)
class Asked:
    """What a command asked of its run-level analyses."""

    whatif: bool | None = None  # the what-if always, never, or when cheap (None)
    cross_rank: bool = True
    drop: DropSpec = field(default_factory=DropSpec)  # what the what-if drops (``--drop``)
    predicted: bool = False  # the what-if keeps its predicted timelines (``--trace-out``)


def check_drop(drop: DropSpec) -> DropSpec:
    """``drop`` when its rule is one of ``DROPS``; a ProfplugError else."""
    if drop.kinds not in DROPS:
        raise ProfplugError(f"unknown --drop {drop.kinds!r} (choose from {', '.join(DROPS)})")
    return drop


def whatif_if_cheap(timelines: list[Timeline], options: StallOptions,
                    drop: DropSpec | None = None, ranks: list[RankResult] | None = None,
                    keep_predicted: bool = False, memo: Memo | None = None
                    ) -> WhatIfResult | None:
    """The what-if of a report by default (None without GPU work): run when the run has at most
    ``WHATIF_AUTO_MAX_EVENTS`` API calls + GPU ops (~2 us each); else a ProfplugError saying
    so, which the report keeps as a warning."""
    if not any(t.n_gpu for t in timelines):  # nothing to replay: the host-only summary
        return None
    n = sum(t.n_events for t in timelines)
    if n > WHATIF_AUTO_MAX_EVENTS:
        raise ProfplugError(f"what-if not run by default on {n:,} events (over "
                            f"{WHATIF_AUTO_MAX_EVENTS:,}): --whatif runs it")
    return whatif(timelines, drop or DropSpec(), options, ranks=ranks,
                  keep_predicted=keep_predicted, memo=memo)


def whatif_spec(asked: Asked) -> AnalysisSpec | None:
    """The what-if: forced (``--whatif``), never (``--no-whatif``), else when cheap; keeping
    its predicted timelines when asked (then in one process, never cached)."""
    if asked.whatif is False:
        return None
    drop, keep = asked.drop, asked.predicted
    if asked.whatif:
        return whatif_analysis(drop, keep_predicted=keep)

    def cheap(timelines: list[Timeline], options: StallOptions,
              ranks: list[RankResult] | None, memo: Memo) -> WhatIfResult | None:
        return whatif_if_cheap(timelines, options, drop, ranks, keep, memo)

    return AnalysisSpec(name="whatif", label="what-if", run=cheap,
                        in_rounds=None if keep else WHATIF, drop=drop,
                        cache_key=None if keep else
                        f"whatif auto<={WHATIF_AUTO_MAX_EVENTS} {drop!r}",
                        max_events=WHATIF_AUTO_MAX_EVENTS)


REGISTRY: tuple[tuple[str, Callable[[Asked], AnalysisSpec | None]], ...] = (
    ("whatif", whatif_spec),
    ("host_only", lambda asked: HOST_ONLY_SPEC),  # a run without GPU work: what it has
    ("cross_rank", lambda asked: CROSS_RANK_SPEC if asked.cross_rank else None),
)


def report_analyses(whatif: bool | None, cross_rank: bool = True,
                    drop: DropSpec | None = None, predicted: bool = False
                    ) -> list[AnalysisSpec]:
    """The run-level analyses of a report (and of each run of a compare), in registry order:
    the what-if always, never, or when cheap (``whatif`` True, False, None), dropping
    ``drop`` (default: what the sync policy changes, ``graph.dropset``); the host-only
    summary; the cross-rank analysis unless ``cross_rank`` is False. ``predicted``: the
    what-if keeps its predicted timelines (``--trace-out``)."""
    asked = Asked(whatif, cross_rank, check_drop(drop or DropSpec()), predicted)
    return [spec for _, make in REGISTRY if (spec := make(asked)) is not None]
