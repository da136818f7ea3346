"""A run-level analysis described by data: its name, what it needs, where it may run, what
its result is cached under and its limits. The report (``report.analysis``), the result
cache (``scale.result_cache``), the placement on workers (``scale.placement``) and the
warnings all read this, and nothing else, of an analysis; the registry of the analyses a
report runs is ``report.registry``.

An analysis runs in one of three ways, the same on the local pool and on a Dask cluster:

- ``run`` (always given): over every rank's Timeline in one process, with the ranks' stall
  analyses (the what-if's replay, the cross-rank matching) and the report's ``Memo``
  (``core.memo``: what its analyses compute over the same timelines, shared).
- ``part`` and ``join``: ``part(timeline)`` is made where each rank is read (on the worker)
  and only that value travels; ``join(parts, ranks)`` makes the result in the client.
- ``rounds`` (a :class:`RoundsCapability`): in rounds where the ranks are read
  (``scale.run_level``), so that no timeline travels to the client: a first-round part of
  each rank, then the client's plan, which may ask the ranks for more (:class:`Asks`) before
  it is :class:`Done`. Any analysis may declare it; one that does not runs whole or by rank
  beside those that do.

Nothing outside an analysis's own package names it by its key: the report, the placement
and the rounds read the spec (``tests/unit/analyzers/core/test_analysis_keys.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.optional import Outcome, TaskError

ANY_RUN: Final = "any"  # applies to any run
GPU_FREE: Final = "gpu-free"  # applies only when no rank has GPU work (its parts: ranks without)

# (timelines, stall options, the ranks' stall analyses or None: redo them, the report's memo:
# pass it to the helpers that take one, ``core.memo``) -> a result with ``key`` and
# ``to_dict()``, or None (nothing to add). An exception becomes one warning line.
RunFn = Callable[[list[Any], Any, "list[Any] | None", Memo], Any]
PartFn = Callable[[Any], Any]  # one rank's Timeline -> its part (small, picklable)
JoinFn = Callable[[list[Any], list[Any]], Any]  # (parts by rank, ranks' stalls) -> result
# (the ranks' stall analyses, the analysis's result) -> the report's finding in one sentence,
# or None: the analysis has nothing to add to it (``report.finding.headline``)
HeadlineFn = Callable[[list[Any], Any], "str | None"]
# (a rank's Timeline, its ``graph.commview.CommView``) -> its first-round part (picklable)
FirstPart = Callable[[Any, Any], object]


@runtime_checkable
class AddsRankFields(Protocol):
    """A run-level result that adds fields to each rank's JSON object and row (the
    cross-rank analysis's ``comm_transfer_us``, ``comm_wait_us``, ``bubble_us``):
    ``rank_fields(rank)`` after its ``idle_us``, ``step_fields(rank)`` into its ``steps``."""

    def rank_fields(self, rank: int) -> dict[str, Any]: ...

    def step_fields(self, rank: int) -> dict[str, Any]: ...


class RankStep(Protocol):
    """A later round's part of one rank, made where it is read: a picklable object (an
    instance of a module-level class). ``needs_stalls``: it is called with the rank's stall
    analysis (``stalls.rank.RankResult``), else with None."""

    @property
    def needs_stalls(self) -> bool: ...

    def __call__(self, timeline: Any, stall: Any, /) -> object: ...


@dataclass(frozen=True)
class Done:
    """A rounds analysis's end: its result, or why there is none (both None: it does not
    apply)."""

    result: object = None
    error: TaskError | None = None


@dataclass(frozen=True)
class NeedsTimelines:
    """A rounds analysis that needs every rank's Timeline in one process after all (the
    what-if's joined graph with a cycle): the report is then made whole."""


@dataclass(frozen=True)
class Asks:
    """Another round: per rank, the step its worker runs; ``then(values, lost)`` is the
    client's next move from their values by rank (``Ok`` or ``TaskError``; a rank lost with
    its worker has none) and the line of the first file lost."""

    steps: dict[int, RankStep]
    then: Callable[[dict[int, Outcome], str], Next]


Next = Done | NeedsTimelines | Asks


class RoundsCapability(Protocol):
    """What an analysis declares to run in rounds where the ranks are read
    (``scale.run_level``; docs/architecture.md, "Analyses in rounds"). ``big_runs_only``:
    in rounds only on runs of ``$PROFPLUG_ROUNDS_MIN_BYTES`` of traces or more (below, every
    analysis runs in one process: ``scale.placement.rounds_for``)."""

    @property
    def big_runs_only(self) -> bool: ...

    def first_part(self) -> FirstPart:
        """Its part of round one, made of each rank with GPU work where it is read."""
        ...

    def plan(self, run: Any, firsts: dict[int, Outcome]) -> Next:
        """Its next move from round one: ``run`` is the client's ``graph.run_views.RunViews``
        (every rank's comm view, their matching, made once for every analysis), ``firsts``
        its first-round part per rank."""
        ...


@dataclass(frozen=True)
class AnalysisSpec:
    """One run-level analysis (see the module docstring)."""

    name: str  # its key in ``Report.run`` and in the JSON report
    label: str  # what a warning calls it ("what-if failed (...)")
    run: RunFn
    cache_key: str | None = None  # its name and parameters; None: never cached
    applies: Literal["any", "gpu-free"] = ANY_RUN
    part: PartFn | None = None  # with ``join``: made where each rank is read
    join: JoinFn | None = None
    rounds: RoundsCapability | None = None  # runs in rounds where the ranks are read
    headline: HeadlineFn | None = None  # its say in the report's finding
    # its result puts every rank on one clock, or its ``ClocksApart`` error says why not:
    # the report's mixed-sources warning (``readers.clocks.sources_warning``) is then moot
    aligns_clocks: bool = False

    def __post_init__(self) -> None:
        if self.part is not None:
            check_picklable(self.part, f"analysis {self.name!r}: its part")

    def __call__(self, timelines: Sequence[Any], options: Any,
                 ranks: list[Any] | None = None, memo: Memo | None = None) -> Any:
        """``run`` over ``timelines`` (the ranks' stall analyses redone when not given; a
        Memo of this call's own when none is given)."""
        return self.run(list(timelines), options, ranks, memo or Memo())


def check_picklable(fn: Callable[..., Any], what: str) -> None:
    """Raise a one-line TypeError unless ``fn`` is found by name: ``part`` travels to the
    worker processes by its module and qualified name (the local pool pickles it that way),
    so a lambda or a function defined inside another one cannot travel: it must be a
    module-level function (or an instance of a module-level class)."""
    if isinstance(fn, type) or not callable(fn):
        return
    name = getattr(fn, "__qualname__", None)
    if name is None:  # an instance: its class must be found by name
        name = type(fn).__qualname__
    if "<lambda>" in name or "<locals>" in name:
        raise TypeError(f"{what} {name} does not pickle: make it a module-level function "
                        "(worker processes import it by name)")


def as_spec(analysis: AnalysisSpec | Callable[..., Any]) -> AnalysisSpec:
    """``analysis`` as a spec: a plain function ``f(timelines, options)`` is one named after
    itself, run in one process, never cached."""
    if isinstance(analysis, AnalysisSpec):
        return analysis
    fn = analysis
    name = str(getattr(fn, "__name__", type(fn).__name__))
    return AnalysisSpec(name=name, label=name, run=lambda tls, opt, ranks, memo: fn(tls, opt))
