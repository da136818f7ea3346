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
- ``in_rounds``: the two-round protocol of ``scale.run_level`` (the cross-rank analysis and
  the what-if, on runs too big for their timelines to travel).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from profplug.analyzers.core.memo import Memo

ANY_RUN = "any"  # applies to any run
GPU_FREE = "gpu-free"  # applies only when no rank has GPU work (its parts: ranks without)
CROSS_RANK = "cross_rank"  # in_rounds: the cross-rank analysis's rounds (``scale.run_level``)
WHATIF = "whatif"  # in_rounds: the what-if's rounds

# (timelines, stall options, the ranks' stall analyses or None: redo them, the report's memo:
# pass it to the helpers that take one, ``core.memo``) -> a result with ``key`` and
# ``to_dict()``, or None (nothing to add). An exception becomes one warning line.
RunFn = Callable[[list[Any], Any, "list[Any] | None", Memo], Any]
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

    def __call__(self, timelines: Sequence[Any], options: Any,
                 ranks: list[Any] | None = None, memo: Memo | None = None) -> Any:
        """``run`` over ``timelines`` (the ranks' stall analyses redone when not given; a
        Memo of this call's own when none is given)."""
        return self.run(list(timelines), options, ranks, memo or Memo())


def as_spec(analysis: AnalysisSpec | Callable[..., Any]) -> AnalysisSpec:
    """``analysis`` as a spec: a plain function ``f(timelines, options)`` is one named after
    itself, run in one process, never cached."""
    if isinstance(analysis, AnalysisSpec):
        return analysis
    fn = analysis
    name = str(getattr(fn, "__name__", type(fn).__name__))
    return AnalysisSpec(name=name, label=name, run=lambda tls, opt, ranks, memo: fn(tls, opt))
