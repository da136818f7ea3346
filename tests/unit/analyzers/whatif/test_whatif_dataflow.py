"""The what-if on two-rank pipelines: the data-flow bound (``whatif/bound.py``), an op's
wait in its stream's queue never replayed as a launch latency (``graph/rankmodel.py``), and
the shipped two-GPU runs held to the bound."""

from __future__ import annotations

from pathlib import Path

import pytest
from profplug.analyzers.graph.model import build_model
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.rank import analyze_rank
from profplug.analyzers.whatif import DropSpec, whatif, whatif_unprofiled
from profplug.analyzers.whatif.bound import apply_bound
from profplug.analyzers.whatif.result import RankWhatIf
from profplug.analyzers.whatif.unprofiled import UNPROFILED_BAND_PCT
from synth import KinetoTrace
from synth.pipeline import PipelineSpec, write

ROOT = Path(__file__).resolve().parents[4]
SHARED = ROOT.parent / "shared" / "traces" / "mcore_pp2_client"
TWO_GPU = sorted(p.parent for p in (ROOT / "sample_traces").glob("pp2_*/**/device")
                 if (p.parent / "event").is_dir())


def _rank(rank: int, predicted: float, cadence: float, recorded: float = 8000.0) -> RankWhatIf:
    return RankWhatIf(rank=rank, basis="step", n_steps=10, recorded_us=recorded,
                      replayed_us=recorded, model_error_pct=0.0, predicted_us=predicted,
                      saving_us=recorded - predicted, saving_pct=0.0, direct_us=100.0,
                      indirect_us=0.0, dropped_calls=10, recorded_idle_by_cause_us={},
                      predicted_idle_by_cause_us={}, host_cadence_us=cadence)


def test_coupled_ranks_are_held_to_the_slowest_hosts_cadence() -> None:
    # given a replay that put both ranks at 3,900 us/step while rank 1's host needs 7,900
    ranks = [_rank(0, 3900.0, 5000.0), _rank(1, 3900.0, 7900.0)]
    apply_bound(ranks, coupled=True)
    # then both run at rank 1's cadence: the pipeline's ranks hand data every step
    for r in ranks:
        assert (r.predicted_us, r.bound_us, r.bound_binds) == (7900.0, 7900.0, True)
        assert (r.replay_predicted_us, r.saving_us, r.indirect_us) == (3900.0, 100.0, 0.0)


def test_uncoupled_ranks_keep_their_own_cadence_and_never_go_over_the_recorded_step() -> None:
    ranks = [_rank(0, 3900.0, 5000.0), _rank(1, 3900.0, 9000.0), _rank(2, 3900.0, 3950.0)]
    apply_bound(ranks, coupled=False)
    assert [r.predicted_us for r in ranks] == [5000.0, 8000.0, 3900.0]
    # a cadence within 2% of the replay's figure is the two medians' noise: it does not bind
    assert [r.bound_binds for r in ranks] == [True, True, False]


def test_a_queued_op_that_started_late_after_its_stream_keeps_no_launch_latency(
        tmp_path: Path) -> None:
    # given op B launched at 6 us behind op A (10-510 us on its stream) that started 2.4 us
    # after A ended (a slow dispatch, over the 2 us queue tolerance), and two ops launched
    # on an idle stream with a 10 us latency
    t = KinetoTrace(rank=0)
    t.launch(0.0, 10.0, 500.0)  # A
    t.launch(6.0, 512.4, 10.0)  # B
    t.launch(600.0, 610.0, 10.0)  # C
    t.annotation("ProfilerStep#0", 0.0, 700.0)
    tl = load_timelines([t.write(tmp_path / "rank0.json")], jobs=1, progress=False)
    m = build_model(tl, DropSpec())
    # then B's start is the stream's (ready + 2.4 us), its latency the rank's typical 10 us,
    # not the 506.4 us it spent in the queue (a wait that a replay would carry along)
    order = m.o_start.argsort()
    b = int(order[1])
    assert (int(m.o_lat[b]), int(m.o_gap[b])) == (10_000, 2_400)


def _pair(tmp: Path, **kw: object) -> tuple[float, float, float]:
    """(device run's recorded step, its prediction, the event run's step) of rank 0 of a
    synthetic two-stage pipeline whose last stage feeds the token back to stage 0."""
    spec = PipelineSpec(stages=2, steps=8, **kw)
    dev, _ = write(spec, tmp / "device")
    evt, _ = write(PipelineSpec(**{**spec.__dict__, "sync": "event"}), tmp / "event")
    w = whatif(load_timelines(dev, jobs=1, progress=False)).rank(0)
    e = analyze_rank(load_timelines(evt, jobs=1, progress=False)[0]).steps
    assert e is not None
    return w.recorded_us, w.predicted_us, e.period_us


def test_removing_the_sync_frees_the_whole_wait_when_the_gpu_sets_the_step(
        tmp_path: Path) -> None:
    # given a GPU-bound pipeline (kernels far longer than their launches)
    rec, pred, event = _pair(tmp_path, kernel_us=60.0, launch_us=2.0)
    # then the event run's step is predicted: the whole wait freed
    assert pred == pytest.approx(event, rel=0.01) and pred < rec


def test_removing_the_sync_frees_little_when_a_peers_host_sets_the_step(
        tmp_path: Path) -> None:
    # given a pipeline whose stage 1 host takes 200 us per launch (40x its kernels): stage 0
    # waits for its token in its synchronize; without it, it waits on the GPU all the same,
    # and only stage 1's own synchronizes' cost is freed
    rec, pred, event = _pair(tmp_path, kernel_us=5.0, launch_us=5.0, slow_host_stage=1,
                             slow_factor=40.0)
    # then the prediction is the event run's step, within a few % of the device run's
    assert pred == pytest.approx(event, rel=0.01) and pred > 0.9 * rec


@pytest.mark.parametrize("run", TWO_GPU, ids=lambda p: str(p.relative_to(ROOT / "sample_traces")))
def test_every_shipped_two_gpu_prediction_respects_the_data_flow_bound(run: Path) -> None:
    res = whatif(load_timelines([run / "device"], progress=False))
    for r in res.ranks:
        assert r.bound_us > 0 and r.predicted_us >= r.bound_us * 0.98, r.rank
        assert r.predicted_us <= r.recorded_us and r.run_band_pct >= r.error_band_pct


@pytest.mark.skipif(not SHARED.is_dir(), reason="no shared Megatron-Core PP=2 pair")
def test_the_megatron_core_pp2_client_is_predicted_within_its_measurements() -> None:
    # given the real Megatron-Core PP=2 client: ab measured 1.05x, a reference without
    # profplug 1.0-1.9x over 4 rounds, the traced event run ~7,260 us/step
    res = whatif(load_timelines([SHARED / "device"], progress=False))
    event: list[float] = []  # the traced event run's steps, from its own report
    for tl in load_timelines([SHARED / "event"], progress=False):
        st = analyze_rank(tl).steps
        assert st is not None
        event.append(st.period_us)
    for r in res.ranks:
        # then the predicted speedup is between 1.0x and 1.5x, and the traced event run's
        # step lies inside the band for a separate run
        assert 1.0 <= r.recorded_us / r.predicted_us <= 1.5, r.rank
        assert abs(r.predicted_us - event[r.rank]) <= r.run_band_pct / 100 * r.predicted_us


def test_a_paired_ab_sets_the_unprofiled_band_by_its_speedup_ci() -> None:
    # given the traced device run of the 1-GPU decode loop and its ab (5 paired rounds:
    # event 1.0167-1.119x faster; device rounds 473-502 us)
    ab = ROOT / "sample_traces" / "ab_h200_decode_loop"
    tls = load_timelines([ab / "traced_device"], progress=False)
    by_step = whatif_unprofiled(tls, 498.48, step_ci_us=(473.072, 502.464))
    by_ratio = whatif_unprofiled(tls, 498.48, step_ci_us=(473.072, 502.464),
                                 ratio_ci=(1.0167, 1.119))
    # then the calibration term is the ratio's half-width, 4.8% of its midpoint, on top of
    # the same model band; the prediction itself is the same
    plain = whatif_unprofiled(tls, 498.48)
    r, p, s = by_ratio.rank(0), plain.rank(0), by_step.rank(0)
    assert r.predicted_us == p.predicted_us == s.predicted_us
    assert r.error_band_pct == pytest.approx(p.error_band_pct - UNPROFILED_BAND_PCT + 4.8,
                                             abs=0.11)
    assert any("speedup's 95% CI (1.017-1.119x" in a for a in by_ratio.assumptions)
