"""A toy run-level analysis that counts each rank's GPU ops, added to the report's registry
the way a new analysis is (one line): as parts made where each rank is read (``BY_RANK``)
or over the whole run's timelines (``WHOLE``).

Its code is docs/architecture.md's worked example (the block that writes
``analyzers/stalls/opcounts.py``), run here as this module's own: the page's code is what
the tests that use this module run, on one process, the local pool and a Dask cluster."""

from __future__ import annotations

from dataclasses import replace

import doc_recipes
import pytest
from profplug.analyzers.core.analysis_spec import AnalysisSpec
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
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, ("op_counts", lambda a: spec)))
