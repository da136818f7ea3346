"""A run-level analysis described by data: its name, what it needs, where it may run, what
its result is cached under and its limits. The report (``report.analysis``), the result
cache (``scale.result_cache``), the placement on workers (``scale.placement``) and the
warnings all read this, and nothing else, of an analysis; the registry of the analyses a
report runs is ``report.registry``.

An analysis runs in one of three ways, the same on the local pool and on a Dask cluster:

- ``run`` (always given): over every rank's Timeline in one process, with the ranks' stall
  analyses (the what-if's replay, the cross-rank matching).
- ``part`` and ``join``: ``part(timeline)`` is made where each rank is read (on the worker)
  and only that value travels; ``join(parts, ranks)`` makes the result in the client.
- ``in_rounds``: the two-round protocol of ``scale.run_level`` (the cross-rank analysis and
  the what-if, on runs too big for their timelines to travel).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

ANY_RUN: Final = "any"  # applies to any run
GPU_FREE: Final = "gpu-free"  # applies only when no rank has GPU work (its parts: ranks without)
CROSS_RANK: Final = "cross_rank"  # in_rounds: the cross-rank analysis's rounds (``scale.run_level``)
WHATIF: Final = "whatif"  # in_rounds: the what-if's rounds

# (timelines, stall options, the ranks' stall analyses or None: redo them) -> a result with
# ``key`` and ``to_dict()``, or None (nothing to add). An exception becomes one warning line.
RunFn = Callable[[list[Any], Any, "list[Any] | None"], Any]
PartFn = Callable[[Any], Any]  # one rank's Timeline -> its part (small, picklable)
JoinFn = Callable[[list[Any], list[Any]], Any]  # (parts by rank, ranks' stalls) -> result


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
    in_rounds: Literal["cross_rank", "whatif"] | None = None
    drop: Any = None  # the what-if's drop rule (a ``graph.dropset.DropSpec``), for in_rounds
    # in one process only up to this many API calls + GPU ops (None: no limit); past it, a
    # what-if whose rounds fail does not fall back to one process
    max_events: int | None = None

    def __post_init__(self) -> None:
        if self.part is not None:
            check_picklable(self.part, f"analysis {self.name!r}: its part")

    def __call__(self, timelines: Sequence[Any], options: Any,
                 ranks: list[Any] | None = None) -> Any:
        """``run`` over ``timelines`` (the ranks' stall analyses redone when not given)."""
        return self.run(list(timelines), options, ranks)


def check_picklable(fn: Callable[..., Any], what: str) -> None:
    """Raise a one-line TypeError unless ``fn`` pickles by name: ``part`` travels to the
    worker processes (the local pool pickles it; a lambda or a function defined inside
    another one does not pickle), so it must be a module-level function."""
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError):
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(f"{what} {name} does not pickle: make it a module-level function "
                        "(worker processes import it by name)") from None


def as_spec(analysis: AnalysisSpec | Callable[..., Any]) -> AnalysisSpec:
    """``analysis`` as a spec: a plain function ``f(timelines, options)`` is one named after
    itself, run in one process, never cached."""
    if isinstance(analysis, AnalysisSpec):
        return analysis
    fn = analysis
    name = str(getattr(fn, "__name__", type(fn).__name__))
    return AnalysisSpec(name=name, label=name, run=lambda tls, opt, ranks: fn(tls, opt))
