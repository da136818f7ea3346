"""A toy run-level analysis that counts each rank's GPU ops, added to the report's registry
the way a new analysis is (one line): as parts made where each rank is read (``BY_RANK``)
over the whole run's timelines (``WHOLE``), or in rounds where the ranks are read
(``IN_ROUNDS``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import pytest
from profplug.analyzers.core.analysis_spec import AnalysisSpec, Asks, Done
from profplug.analyzers.report import registry


@dataclass
class OpCounts:
    key: ClassVar[str] = "op_counts"
    per_rank: dict[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {"per_rank": {str(k): v for k, v in sorted(self.per_rank.items())}}


def count_part(tl: Any) -> tuple[int, int]:
    return tl.rank, int(tl.n_gpu)


def count_join(parts: list[tuple[int, int]], ranks: list[Any]) -> OpCounts:
    return OpCounts(dict(parts))


def count_run(timelines: list[Any], options: Any, ranks: list[Any] | None) -> OpCounts:
    return OpCounts({tl.rank: int(tl.n_gpu) for tl in timelines})


BY_RANK = AnalysisSpec(name="op_counts", label="op counts", run=count_run, part=count_part,
                       join=count_join)
WHOLE = replace(BY_RANK, part=None, join=None)


def added(monkeypatch: pytest.MonkeyPatch, spec: AnalysisSpec) -> None:
    """``spec`` added to the registry: the one line a new analysis adds."""
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, lambda a: spec))


def count_first(tl: Any, view: Any) -> int:
    """Round one of :data:`IN_ROUNDS`: the rank's NCCL kernels (its comm view's)."""
    return int(view.op_index.size)


@dataclass(frozen=True)
class CountStep:
    """Round two of :data:`IN_ROUNDS`: the rank's GPU ops, where it is read."""

    needs_stalls = False

    def __call__(self, tl: Any, stall: Any) -> int:
        return int(tl.n_gpu)


@dataclass(frozen=True)
class CountRounds:
    """The op counts in rounds (``core.analysis_spec.RoundsCapability``): every rank with
    NCCL kernels in round one is asked for its GPU ops in round two."""

    big_runs_only = False

    def first_part(self) -> Any:
        return count_first

    def plan(self, run: Any, firsts: dict[int, Any]) -> Any:
        asked = {rank: CountStep() for rank, got in firsts.items() if got.value}
        return Asks(asked, lambda values, lost: Done(OpCounts(
            {rank: got.value for rank, got in values.items()})))


IN_ROUNDS = replace(WHOLE, rounds=CountRounds())
