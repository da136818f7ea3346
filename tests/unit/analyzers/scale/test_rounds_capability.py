"""Running in rounds where the ranks are read is a capability any analysis declares on its
spec (``AnalysisSpec.rounds``): an added analysis that declares it runs in the same rounds as
the what-if and the cross-rank analysis; one that does not runs whole, and the others still
run in rounds on a big run."""

from __future__ import annotations

from pathlib import Path

import pytest
from added_analysis import IN_ROUNDS, WHOLE, added
from profplug.analyzers.core.analysis_spec import AnalysisSpec
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale import placement, run_level
from profplug.analyzers.scale.load import load_timelines
from reference import Spy, one_process, report_json
from synth.pipeline import PipelineSpec, write


@pytest.fixture(scope="module")
def run4(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write(PipelineSpec(stages=2, tp=2, steps=3), tmp_path_factory.mktemp("r4"))[0]


@pytest.mark.parametrize("spec", [IN_ROUNDS, WHOLE], ids=["with-rounds", "without"])
def test_an_added_analysis_leaves_the_others_in_rounds_on_a_big_run(
    run4: list[Path], monkeypatch: pytest.MonkeyPatch, spec: AnalysisSpec
) -> None:
    want = {str(tl.rank): int(tl.n_gpu) for tl in load_timelines(run4, jobs=1)}
    # given a run that counts as big, and an analysis added with or without the capability
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    added(monkeypatch, spec)
    run = report_analyses(True)
    here = one_process(run4, run, monkeypatch)
    spy = Spy(monkeypatch)
    there = analyze(run4, run=run, jobs=2, progress=False, keep_gaps=False)
    # then the report is the one made in one process, the added analysis's result in it
    assert report_json(there) == report_json(here)
    assert there.to_dict()["op_counts"] == {"per_rank": want}
    # and the what-if and the cross-rank analysis ran in rounds: their parts came back
    firsts = [v.value.value for r in spy.first for v in r.values if v.name == run_level.FIRST]
    assert len(firsts) == 4 and all({"whatif", "cross_rank"} <= set(f.parts) for f in firsts)
    assert spy.second
    in_rounds = spec.rounds is not None
    # only the analysis without the capability had the timelines sent to the client
    assert any(r.timelines for r in spy.first) is not in_rounds
    assert all(not r.timelines for r in spy.second)
    assert any(v.name == "op_counts" for r in spy.second for v in r.values) is in_rounds
