"""What-if on N-rank pipelines (PP=3..8, TP x PP): NCCL kernels coupled through the
cross-rank matching. The replay as recorded must reproduce the trace within 5%, and the
device run replayed without its synchronizes should land on the same pipeline run with
event waits (the generator's timing rules are the model's, so here it lands exactly)."""

from __future__ import annotations

from pathlib import Path

import pytest
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import WhatIfResult, whatif
from synth.pipeline import PipelineSpec, write


def _whatif(tmp: Path, spec: PipelineSpec) -> WhatIfResult:
    paths, _ = write(spec, tmp)
    return whatif(load_timelines(paths, jobs=1, progress=False))


CASES = [
    PipelineSpec(stages=3, steps=6),
    PipelineSpec(stages=4, steps=6),
    PipelineSpec(stages=4, steps=6, slow_stage=1),
    PipelineSpec(stages=8, steps=6),
    PipelineSpec(stages=8, steps=6, slow_stage=6, slow_factor=4.0),
    PipelineSpec(stages=4, steps=6, tp=2),
    PipelineSpec(stages=2, steps=6, tp=4, coll_seq=False),
]


@pytest.mark.parametrize("spec", CASES, ids=lambda s: f"tp{s.tp}xpp{s.stages}"
                         + (f"-slow{s.slow_stage}" if s.slow_stage is not None else ""))
def test_replay_and_prediction(spec: PipelineSpec, tmp_path: Path) -> None:
    # given the same pipeline with device-wide syncs and with event waits
    dev = _whatif(tmp_path / "device", spec)
    evt = _whatif(tmp_path / "event", PipelineSpec(**{**spec.__dict__, "sync": "event"}))
    # then both replays reproduce their traces (coupled NCCL kernels, any number of ranks)
    assert dev.max_model_error_pct <= 5.0 and evt.max_model_error_pct <= 5.0
    assert not any("not coupled" in a for a in dev.assumptions)
    assert any("coupled across ranks by" in a for a in dev.assumptions)
    # and dropping the device run's syncs predicts the event run, rank by rank
    for d, e in zip(dev.ranks, evt.ranks, strict=True):
        assert d.predicted_us == pytest.approx(e.recorded_us, rel=0.01), d.rank
        assert d.saving_us > 0


def test_eight_stage_replay_error_is_zero(tmp_path: Path) -> None:
    res = _whatif(tmp_path, PipelineSpec(stages=8, steps=10, slow_stage=3))
    assert res.max_model_error_pct == 0.0
    assert len(res.ranks) == 8 and not res.warnings
