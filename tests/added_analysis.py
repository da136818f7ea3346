"""A toy run-level analysis that counts each rank's GPU ops, added to the report's registry
the way a new analysis is (one line): as parts made where each rank is read (``BY_RANK``)
or over the whole run's timelines (``WHOLE``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import pytest
from profplug.analyzers.core.analysis_spec import AnalysisSpec
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


def count_run(timelines: list[Any], options: Any, ranks: list[Any] | None,
              memo: Any) -> OpCounts:
    return OpCounts({tl.rank: int(tl.n_gpu) for tl in timelines})


BY_RANK = AnalysisSpec(name="op_counts", label="op counts", run=count_run, part=count_part,
                       join=count_join)
WHOLE = replace(BY_RANK, part=None, join=None)


def added(monkeypatch: pytest.MonkeyPatch, spec: AnalysisSpec) -> None:
    """``spec`` added to the registry: the one line a new analysis adds."""
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, ("op_counts", lambda a: spec)))
