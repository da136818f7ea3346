"""Adding an analysis is its module and one registry line: it then runs in one process, on
the local pool and (tests/integration/test_dask_cluster.py) on a Dask cluster, the same.

The analysis here counts each rank's GPU ops, once as parts made where each rank is read
(``part`` + ``join``) and once over the whole run's timelines (``run`` only)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from added_analysis import BY_RANK, WHOLE, OpCounts, added
from profplug.analyzers.commands.report import run_report
from profplug.analyzers.core.analysis_spec import AnalysisSpec
from profplug.analyzers.scale.load import load_timelines
from synth.pipeline import PipelineSpec, write


def report_of(run: list[Path], out: Path, **kw: object) -> dict[str, Any]:
    assert run_report(run, fmt="json", output=out, quiet=True, **kw) == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def run4(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write(PipelineSpec(stages=2, tp=2, steps=3), tmp_path_factory.mktemp("r4"))[0]


@pytest.mark.parametrize("spec", [BY_RANK, WHOLE], ids=["by-rank", "whole-run"])
def test_an_analysis_added_by_one_registry_line_runs_in_one_process_and_on_the_pool(
        run4: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        spec: AnalysisSpec) -> None:
    want = {str(tl.rank): int(tl.n_gpu) for tl in load_timelines(run4, jobs=1)}
    assert len(want) == 4 and all(want.values())
    added(monkeypatch, spec)
    here = report_of(run4, tmp_path / "one.json", jobs=1)
    pool = report_of(run4, tmp_path / "pool.json", jobs=2)
    assert here["op_counts"] == pool["op_counts"] == {"per_rank": want}
    # its key follows the registry's order: after the analyses listed before it
    assert list(here)[-1] == "op_counts" and "cross_rank" in here


def test_a_failing_added_analysis_is_one_warning(run4: list[Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(parts: list[Any], ranks: list[Any]) -> OpCounts:
        raise ValueError("planted")

    added(monkeypatch, replace(BY_RANK, join=broken))
    got = report_of(run4, tmp_path / "r.json", jobs=1)
    assert "op_counts" not in got
    assert [w for w in got["warnings"] if w.startswith("op counts failed (ValueError: planted")]


def count_ranks(tl: object) -> int:
    return 1


def test_a_part_that_does_not_pickle_is_refused_when_the_spec_is_made() -> None:
    # a part runs on worker processes, which receive it pickled by name
    with pytest.raises(TypeError, match=r"^analysis 'toy': its part \S*<lambda> does not "
                                        r"pickle: make it a module-level function"):
        AnalysisSpec(name="toy", label="toy", run=lambda t, o, r: None, part=lambda tl: 1)
    assert AnalysisSpec(name="toy", label="toy", run=lambda t, o, r: None,
                        part=count_ranks).part is count_ranks
