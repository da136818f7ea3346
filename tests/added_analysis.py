"""A toy run-level analysis that counts each rank's GPU ops, added to the report's registry
the way a new analysis is (one line): as parts made where each rank is read (``BY_RANK``)
or over the whole run's timelines (``WHOLE``), or in rounds where the ranks are read
(``IN_ROUNDS``).

Its code is docs/architecture.md's worked example (the block that writes
``analyzers/stalls/opcounts.py``), run here as this module's own: the page's code is what
the tests that use this module run, on one process, the local pool and a Dask cluster."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import doc_recipes
import pytest
from profplug.analyzers.core.analysis_spec import AnalysisSpec, Asks, Done
from profplug.analyzers.report import registry

# OpCounts, count_part, count_join, count_run and OP_COUNTS_SPEC, defined in this module (so
# that worker processes find count_part here, by name)
exec(compile(doc_recipes.code_of("analyzers/stalls/opcounts.py"),
             f"{doc_recipes.ARCHITECTURE} (analyzers/stalls/opcounts.py)", "exec"), globals())

OpCounts = globals()["OpCounts"]
BY_RANK: AnalysisSpec = globals()["OP_COUNTS_SPEC"]
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
