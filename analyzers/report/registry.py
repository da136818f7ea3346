"""The run-level analyses a report runs: one line each in :data:`REGISTRY`, in the order of
their keys in the JSON report (each spec's ``name``).

Each line names an analysis and makes its spec (``core.analysis_spec.AnalysisSpec``) from
what the command asked (:class:`Asked`: ``--whatif``/``--no-whatif``, ``--no-cross-rank``,
``--drop``); None leaves it out. The report runs the specs the same way in one process, on
the local pool and on a Dask cluster (``report.analysis.analyze``): adding an analysis is its
module and one line here (docs/architecture.md, "Worked examples": an analysis).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from profplug.analyzers.core.analysis_spec import AnalysisSpec
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.crossrank.analysis import CROSS_RANK_SPEC
from profplug.analyzers.graph.dropset import DROP_ALL, DROP_DEVICE, DROP_POLICY, DropSpec
from profplug.analyzers.stalls.hostonly import HOST_ONLY_SPEC
from profplug.analyzers.whatif.analysis import whatif_analysis

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


def whatif_spec(asked: Asked) -> AnalysisSpec | None:
    """The what-if: forced (``--whatif``), never (``--no-whatif``), else when cheap (at most
    ``WHATIF_AUTO_MAX_EVENTS``); keeping its predicted timelines when asked (then in one
    process, never cached)."""
    if asked.whatif is False:
        return None
    if asked.whatif:
        return whatif_analysis(asked.drop, keep_predicted=asked.predicted)
    return whatif_analysis(asked.drop, keep_predicted=asked.predicted,
                           max_events=WHATIF_AUTO_MAX_EVENTS, when_cheap=True)


def cross_rank_spec(asked: Asked) -> AnalysisSpec | None:
    """The cross-rank analysis, unless ``--no-cross-rank``."""
    return CROSS_RANK_SPEC if asked.cross_rank else None


REGISTRY: tuple[Callable[[Asked], AnalysisSpec | None], ...] = (
    whatif_spec,
    lambda asked: HOST_ONLY_SPEC,  # a run without GPU work: what it has
    cross_rank_spec,
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
    return [spec for make in REGISTRY if (spec := make(asked)) is not None]
