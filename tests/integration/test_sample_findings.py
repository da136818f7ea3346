"""What the real H200 traces in sample_traces/ show (see sample_traces/README.md).

Pinned findings, not exact numbers: the traces are real and the tests say what a user can
rely on when reading them.
"""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest
import sample_cache
from profplug.analyzers import analyze
from profplug.analyzers.report.analysis import Report

ST = Path(__file__).resolve().parents[2] / "sample_traces"
WRAPPERS = ("profplug.recv_from_prev_pipeline_rank_", "profplug.send_to_next_pipeline_rank")


def rep(rel: str) -> Report:
    """The run's per-rank report, made once per session (tests/sample_cache.py)."""
    return sample_cache.stalls(rel)


def share(r, cause: str) -> float:
    return r.idle_by_cause_us()[cause] / r.total("window_us")


@pytest.mark.parametrize("run", ["pp2_infer_kineto/device", "pp2_infer_nsys/device"])
def test_device_runs_charge_idle_to_the_p2p_synchronize(run: str) -> None:
    for r in rep(run).ranks:
        # a clear direct share on every rank (measured 2.1-2.7% of the window)
        assert share(r, "device_sync") > 0.01
        # and all of it at the profplug send/recv wrappers' synchronize
        charged = sum(c.idle_caused_us for c in r.callsites if c.api == "cudaDeviceSynchronize")
        at_wrappers = sum(c.idle_caused_us for c in r.callsites
                          if c.callsite.startswith(WRAPPERS) and "sync.device" in c.callsite)
        assert at_wrappers == pytest.approx(charged) and charged > 0
        assert r.steps is not None and r.steps.n_steps == 20


def test_megatron_device_run_charges_the_patched_megatron_recv() -> None:
    r = rep("pp2_megatron_kineto/device").rank(1)  # the last stage receives activations
    assert share(r, "device_sync") > 0.01
    (top,) = [c for c in r.callsites if c.idle_caused_us > 0]
    assert top.callsite == "profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device"


@pytest.mark.parametrize("run", ["pp2_megatron_kineto/device", "pp2_megatron_nsys/device"])
def test_megatron_device_sync_idle_is_all_at_the_patched_p2p(run: str) -> None:
    report = rep(run)
    assert max(share(r, "device_sync") for r in report.ranks) > 0.01
    for r in report.ranks:
        for c in r.callsites:
            if c.idle_caused_us > 0:
                assert c.callsite.startswith(WRAPPERS) and c.callsite.endswith("sync.device")


@pytest.mark.parametrize("run", ["pp2_infer_kineto/event", "pp2_infer_nsys/event",
                                 "pp2_megatron_kineto/event", "pp2_megatron_nsys/event"])
def test_event_runs_have_no_device_sync_idle(run: str) -> None:
    for r in rep(run).ranks:
        assert r.idle_by_cause_us()["device_sync"] == 0.0
        assert not [c for c in r.callsites if "sync.device" in c.callsite]


@pytest.mark.parametrize("family", ["pp2_infer_kineto", "pp2_megatron_kineto"])
def test_event_waits_are_faster_per_step(family: str) -> None:
    dev, evt = rep(f"{family}/device"), rep(f"{family}/event")
    for rd, re_ in zip(dev.ranks, evt.ranks, strict=True):
        assert rd.steps is not None and re_.steps is not None
        if family == "pp2_infer_kineto":  # the decode loop: event waits cut the step by ~36%
            assert re_.steps.period_us < 0.75 * rd.steps.period_us
        # Megatron's path is host-bound and the runs differ by their own noise: no claim


def idle_fractions(r) -> dict[str, float]:
    return {c: v / r.total("window_us") for c, v in r.idle_by_cause_us().items()}


def test_kineto_and_nsys_agree_on_the_device_run() -> None:
    # Two separate runs of the same job and policy: per rank, the idle fraction of each
    # cause that matters agrees within 20% relative (seen: at most 14%).
    k, n = rep("pp2_infer_kineto/device"), rep("pp2_infer_nsys/device")
    for rk, rn in zip(k.ranks, n.ranks, strict=True):
        fk, fn = idle_fractions(rk), idle_fractions(rn)
        for cause in ("device_sync", "host_bound"):
            assert fn[cause] == pytest.approx(fk[cause], rel=0.20), (rk.rank, cause)


def test_kineto_and_nsys_agree_on_the_single_gpu_waits() -> None:
    k, n = rep("h200_three_waits/kineto").rank(0), rep("h200_three_waits/nsys").rank(0)
    fk, fn = idle_fractions(k), idle_fractions(n)
    for cause in ("device_sync", "event_sync"):
        assert fn[cause] == pytest.approx(fk[cause], rel=0.20)
    # all three waits show, each at its own call site
    sites = {c.callsite: c for c in k.callsites}
    assert sites["three_waits.event_sync"].api == "cudaEventSynchronize"
    assert sites["three_waits.stream_sync"].api == "cudaStreamSynchronize"
    assert any(s.startswith("profplug.synchronize examples/three_waits.py:") for s in sites)
    assert {s.api for s in k.syncs} >= {"cudaDeviceSynchronize", "cudaEventSynchronize",
                                        "cudaStreamSynchronize", "cudaStreamWaitEvent"}


def test_nsys_device_sync_totals_equal_a_direct_sql_query(tmp_path: Path) -> None:
    src = ST / "pp2_infer_nsys/device/report.sqlite.gz"
    db = tmp_path / "x.sqlite"
    db.write_bytes(gzip.decompress(src.read_bytes()))
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT (r.globalTid >> 24) & 16777215 AS pid, count(*), sum(r.end - r.start) "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaDeviceSynchronize%' GROUP BY pid ORDER BY pid").fetchall()
    con.close()
    report = analyze([db], jobs=1)
    ours = sorted((s.count, round(s.host_blocked_us * 1000)) for r in report.ranks
                  for s in r.syncs if s.api == "cudaDeviceSynchronize")
    assert ours == sorted((n, total) for _, n, total in rows)


FAMILIES = {
    "kineto": ["pp2_infer_kineto", "pp2_infer_repeats/kineto2", "pp2_infer_repeats/kineto3"],
    "nsys": ["pp2_infer_nsys", "pp2_infer_repeats/nsys2", "pp2_infer_repeats/nsys3"],
}


@pytest.mark.parametrize("profiler", sorted(FAMILIES))
def test_whatif_of_device_runs_predicts_the_event_runs(profiler: str) -> None:
    """Three device runs replayed without their synchronizes vs three measured event runs
    (same profiler and window): the mean predicted step time is within 20% of the mean
    measured one on every rank (see below). Single pairs are noisier than that (the event runs alone
    spread by up to +-25%; see sample_traces/README.md), hence the means."""
    predicted: dict[int, list[float]] = {}
    measured: dict[int, list[float]] = {}
    for fam in FAMILIES[profiler]:
        res = sample_cache.whatif(f"{fam}/device")
        assert res.max_model_error_pct <= 5.0  # the replay reproduces the recorded run
        for r in res.ranks:
            predicted.setdefault(r.rank, []).append(r.predicted_us)
            assert r.predicted_us < 0.8 * r.recorded_us  # a large saving, mostly indirect
            assert r.indirect_us > 5 * r.direct_us
        for r in rep(f"{fam}/event").ranks:
            assert r.steps is not None
            measured.setdefault(r.rank, []).append(r.steps.period_us)  # the report's step
    # On the report's step figure (first op of a step to the next step's first op) for both:
    # the predicted timeline lets the host run ahead without bound (the model has no limit on
    # the launch queue), so a step's first op, a NCCL recv posted early, keeps the host's pace
    # there: 18.5% below the measured step on Nsight's rank 1 (the mean GPU span used before,
    # to the last op's end, hid it: within 15%). Hence 20%.
    for rank, p in predicted.items():
        mp, mm = sum(p) / len(p), sum(measured[rank]) / len(measured[rank])
        assert abs(mp - mm) / mm <= 0.20, (rank, mp, mm)
