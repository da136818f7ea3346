"""Stall attribution on synthetic Kineto traces with exactly known answers (times in us)."""

from __future__ import annotations

from pathlib import Path

import pytest
from profplug.analyzers import CAUSES
from synth import KinetoTrace, analyze_traces, mixed_trace


def test_each_cause_is_charged_exactly(tmp_path: Path) -> None:
    r = analyze_traces(tmp_path, mixed_trace()).rank(0)
    assert r.total("window_us") == 35.0
    assert r.total("busy_us") == 21.0
    assert r.idle_by_cause_us() == {"device_sync": 6.0, "event_sync": 3.0, "host_bound": 5.0,
                                    "other": 0.0}


def test_sync_api_stats_and_callsites(tmp_path: Path) -> None:
    r = analyze_traces(tmp_path, mixed_trace()).rank(0)
    by_api = {s.api: s for s in r.syncs}
    dev = by_api["cudaDeviceSynchronize"]
    assert (dev.kind, dev.count, dev.host_blocked_us, dev.idle_caused_us) == ("device", 1, 7.0,
                                                                               6.0)
    assert by_api["cudaStreamSynchronize"].kind == "event"
    sites = {(c.callsite, c.api): c for c in r.callsites}
    site = sites[("profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device",
                  "cudaDeviceSynchronize")]
    assert site.idle_caused_us == 6.0 and site.count == 1
    assert sites[("unannotated", "cudaStreamSynchronize")].idle_caused_us == 3.0


def test_innermost_user_annotation_is_the_callsite(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10)
    t.annotation("decode_step", 1, 30)
    t.annotation("layer_3", 2, 20)
    t.annotation("sibling_before", 2.5, 1)
    t.runtime("cudaDeviceSynchronize", 5, 7)
    t.launch(15, 16, 4)
    r = analyze_traces(tmp_path, t).rank(0)
    assert [c.callsite for c in r.callsites] == ["layer_3"]


def test_tolerance_decides_whether_a_late_gap_is_the_syncs(tmp_path: Path) -> None:
    # The sync returns at 11; the GPU goes idle at 12.5, 1.5 us later (clock skew).
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 12.5)
    t.runtime("cudaDeviceSynchronize", 5, 6)
    t.launch(15, 20, 1)
    # within 2 us the gap is the sync's, up to the 6 us it blocked the host; the rest the host's
    r = analyze_traces(tmp_path, t, tol_us=2).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 6.0
    assert r.idle_by_cause_us()["host_bound"] == 1.5
    r = analyze_traces(tmp_path, t, tol_us=1).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 0.0
    assert r.idle_by_cause_us()["host_bound"] == 7.5


def test_device_sync_wins_over_an_overlapping_event_sync(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10)
    t.runtime("cudaDeviceSynchronize", 5, 7, tid=1)
    t.runtime("cudaEventSynchronize", 4, 9, tid=2)
    t.launch(15, 16, 4)
    r = analyze_traces(tmp_path, t).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 6.0
    assert r.idle_by_cause_us()["event_sync"] == 0.0


def test_longer_earlier_sync_on_another_thread_is_found(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10)
    t.runtime("cudaDeviceSynchronize", 1, 14, tid=2)  # holds the gap start (10)
    t.runtime("cudaDeviceSynchronize", 6, 1, tid=1)  # later start, ends before the gap
    t.launch(16, 17, 3)
    r = analyze_traces(tmp_path, t).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 7.0
    idle = sorted(s.idle_caused_us for s in r.syncs)
    assert idle == [7.0]


def test_multi_stream_busy_is_the_union(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10, stream=7)
    t.launch(1, 5, 10, stream=13)  # overlaps: busy 0-15
    t.launch(19, 20, 5, stream=7)  # gap 15-20, host not blocked
    r = analyze_traces(tmp_path, t).rank(0)
    assert r.total("busy_us") == 20.0
    assert r.idle_by_cause_us()["host_bound"] == 5.0


def test_multi_gpu_rank_reports_each_device(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10, device=0)
    t.launch(0, 0, 2, device=1)
    t.runtime("cudaDeviceSynchronize", 5, 7)
    t.launch(15, 16, 4, device=0)  # device 0: gap 10-16 device_sync
    t.launch(19, 20, 4, device=1)  # device 1: gap 2-20 host_bound (ends before sync - tol)
    r = analyze_traces(tmp_path, t).rank(0)
    d0, d1 = r.devices
    assert (d0.device, d0.idle_by_cause_us["device_sync"]) == (0, 6.0)
    assert (d1.device, d1.idle_by_cause_us["host_bound"]) == (1, 18.0)
    assert r.total("idle_us") == 24.0


def test_multi_gpu_rank_counts_other_reasons_over_all_its_devices(tmp_path: Path) -> None:
    # The host trace spans 0-1 (tolerance 2 us), so every gap starting after 3 is outside it:
    # device 0 has two such gaps (10-20, 25-30), device 1 one (5-40): three in all.
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10, device=0)
    t.gpu(20, 5, device=0)
    t.gpu(30, 5, device=0)
    t.gpu(0, 5, device=1)
    t.gpu(40, 5, device=1)
    r = analyze_traces(tmp_path, t).rank(0)
    d0, d1 = r.devices
    assert (d0.n_gaps, d0.idle_by_cause_us["other"]) == (2, 15.0)
    assert (d1.n_gaps, d1.idle_by_cause_us["other"]) == (1, 35.0)
    assert r.other_reasons == {"gap outside the host trace's time span": 3}


def test_comm_and_compute_split_busy(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10, name="ampere_sgemm", stream=7)
    t.launch(0, 5, 10, name="ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
             stream=20)
    r = analyze_traces(tmp_path, t).rank(0)
    assert (r.total("comm_us"), r.total("compute_us")) == (10.0, 5.0)


def test_rocm_names(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10)
    t.runtime("hipDeviceSynchronize", 5, 7)
    t.runtime("hipStreamSynchronize", 20, 7)
    t.launch(15, 16, 4)
    t.launch(26, 27, 1)  # gap 20-27 starts inside hipStreamSynchronize (20-27)
    r = analyze_traces(tmp_path, t).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 6.0
    assert r.idle_by_cause_us()["event_sync"] == 7.0


def test_gap_after_the_host_trace_ends_is_other(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10)
    t.gpu(20, 5)  # launched before the host trace began recording
    r = analyze_traces(tmp_path, t).rank(0)
    assert r.idle_by_cause_us()["other"] == 10.0
    assert r.other_reasons == {"gap outside the host trace's time span": 1}


def test_gpu_only_trace_has_other_with_a_reason(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.gpu(0, 10)
    t.gpu(15, 5)
    r = analyze_traces(tmp_path, t).rank(0)
    assert r.idle_by_cause_us()["other"] == 5.0
    assert r.other_reasons == {"no host API calls in the trace": 1}


def test_rank_without_gpu_work_is_reported_as_such(tmp_path: Path) -> None:
    t = KinetoTrace(rank=3)
    t.runtime("cudaDeviceSynchronize", 0, 5)
    r = analyze_traces(tmp_path, t).rank(3)
    assert not r.has_gpu_work
    assert r.total("window_us") == 0.0
    assert r.syncs[0].idle_caused_us == 0.0


@pytest.mark.parametrize("cause", list(CAUSES))
def test_causes_list_is_the_json_contract(cause: str, tmp_path: Path) -> None:
    doc = analyze_traces(tmp_path, mixed_trace()).to_dict()
    assert cause in doc["ranks"][0]["idle_by_cause_us"]
