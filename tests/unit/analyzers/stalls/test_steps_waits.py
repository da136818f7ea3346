"""Per-step numbers and non-blocking stream waits on synthetic traces (times in us)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import KinetoTrace, analyze_traces


def stepped_trace(n_steps: int = 3, with_sync: bool = True) -> KinetoTrace:
    """Steps of 20 us: kernel 0-8, sync 3-10 (GPU idle 8-11 while blocked), kernel 11-15."""
    t = KinetoTrace(rank=0)
    for k in range(n_steps):
        o = 20.0 * k
        t.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k + 5}",
                         "pid": t.pid, "tid": 1, "ts": o, "dur": 19.0})
        t.launch(o, o, 8)
        if with_sync:
            t.runtime("cudaDeviceSynchronize", o + 3, 7)
        t.launch(o + 10.5, o + 11, 4)
    # A last step cut by the profiler: no GPU work launched in it.
    t.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n_steps + 5}",
                     "pid": t.pid, "tid": 1, "ts": 20.0 * n_steps, "dur": 1.0})
    return t


def test_steps_are_counted_and_incomplete_ones_dropped(tmp_path: Path) -> None:
    r = analyze_traces(tmp_path, stepped_trace()).rank(0)
    s = r.steps
    assert s is not None
    assert (s.n_steps, s.n_dropped) == (3, 1)
    assert s.step_numbers == [5, 6, 7]
    assert s.step_us_mean == 19.0
    # each step: device_sync gap 8-11 (3 us); gap 15-20 before the next step is host_bound
    assert s.idle_per_step_us["device_sync"] == 3.0
    # per step, the median over the series (every step but the last, which has no next
    # step: its trailing gap is in no period): 5 us; the mean over all 3 steps: 10 / 3
    assert s.idle_per_step_us["host_bound"] == 5.0
    assert s.idle_per_step_us_mean["host_bound"] == pytest.approx(5.0 * 2 / 3, abs=1e-3)
    assert s.statistic == "median"


def test_callsite_idle_per_step(tmp_path: Path) -> None:
    r = analyze_traces(tmp_path, stepped_trace()).rank(0)
    (c,) = r.callsites
    assert (c.count, c.idle_caused_us, c.idle_per_step_us) == (3, 9.0, 3.0)


def test_profplug_step_ranges_are_steps(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    for k in range(4):
        t.annotation("profplug.step", 10.0 * k, 9)
        t.launch(10.0 * k, 10.0 * k + 1, 5)
    s = analyze_traces(tmp_path, t).rank(0).steps
    assert s is not None and s.n_steps == 4 and s.step_numbers == [0, 1, 2, 3]


def wait_trace(linked: bool = True) -> KinetoTrace:
    """Stream 13 waits on an event recorded on stream 7 after a kernel ending at 30."""
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 30, stream=7)  # producer: 0-30
    t.launch(1, 2, 3, stream=13)  # earlier op on stream 13: 2-5
    rec = t.runtime("cudaEventRecord", 2, 1)
    wait = t.runtime("cudaStreamWaitEvent", 4, 1)
    t.cuda_sync("Stream Wait Event", 5, 0, stream=13, corr=wait,
                wait_on_stream=7 if linked else None, wait_corr=rec if linked else None)
    # consumer launched at 6, would run at 7 (after launch), waits until 30
    c = t.next_corr() + 50
    t.runtime("cudaLaunchKernel", 6, 1, corr=c)
    t.gpu(30, 5, stream=13, corr=c)
    return t


def test_stream_wait_stall_is_measured_when_linked(tmp_path: Path) -> None:
    r = analyze_traces(tmp_path, wait_trace()).rank(0)
    (w,) = r.stream_waits
    assert (w.stream, w.count, w.linked) == (13, 1, 1)
    # could run at max(prev end 5, launch 6) = 6, awaited work ends at 30
    assert w.stall_us == 24.0
    assert w.gpu_idle_us == 0.0  # stream 7 kept the GPU busy all along
    assert r.stream_wait_us == 24.0
    kinds = {s.api: s.kind for s in r.syncs}
    assert kinds["cudaStreamWaitEvent"] == "stream_wait"


def test_unlinked_stream_wait_is_counted_not_guessed(tmp_path: Path) -> None:
    r = analyze_traces(tmp_path, wait_trace(linked=False)).rank(0)
    (w,) = r.stream_waits
    assert (w.count, w.linked, w.stall_us) == (1, 0, 0.0)


def test_stream_wait_gpu_idle_part(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10, stream=7)
    rec = t.runtime("cudaEventRecord", 1, 1)
    t.launch(2, 20, 10, stream=7)  # launched after the record: not awaited
    wait = t.runtime("cudaStreamWaitEvent", 3, 1)
    t.cuda_sync("Stream Wait Event", 3, 0, stream=13, corr=wait, wait_on_stream=7,
                wait_corr=rec)
    c = t.next_corr() + 50
    t.runtime("cudaLaunchKernel", 4, 1, corr=c)
    t.gpu(12, 2, stream=13, corr=c)  # really starts at 12
    r = analyze_traces(tmp_path, t).rank(0)
    (w,) = r.stream_waits
    assert w.stall_us == 6.0  # could run at 4, awaited end 10
    assert w.gpu_idle_us == 0.0


def test_stream_wait_overlapping_whole_gpu_idle(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 2, stream=7)  # GPU busy 0-2
    t.launch(1, 8, 10, stream=7)  # awaited producer: queued, runs 8-18
    rec = t.runtime("cudaEventRecord", 2, 1)
    wait = t.runtime("cudaStreamWaitEvent", 3, 1)
    t.cuda_sync("Stream Wait Event", 3, 0, stream=13, corr=wait, wait_on_stream=7,
                wait_corr=rec)
    c = t.next_corr() + 50
    t.runtime("cudaLaunchKernel", 4, 1, corr=c)
    t.gpu(18, 2, stream=13, corr=c)
    r = analyze_traces(tmp_path, t).rank(0)
    (w,) = r.stream_waits
    assert w.stall_us == 14.0  # could run at 4 (its launch), awaited work ends at 18
    assert w.gpu_idle_us == 4.0  # the whole GPU idled 2-8; 4-8 lies in the stall


def test_step_period_is_first_op_to_next_first_op(tmp_path: Path) -> None:
    # steps every 20 us; the last step's span ends at its last op (15 us in), the period not
    s = analyze_traces(tmp_path, stepped_trace()).rank(0).steps
    assert s is not None
    assert s.period_us == 20.0
    assert s.gpu_span_us_mean == pytest.approx((20 + 20 + 15) / 3, abs=1e-3)


def test_sync_after_the_last_step_is_the_profiler_closing_not_the_app(tmp_path: Path) -> None:
    t = stepped_trace(n_steps=2, with_sync=False)
    # after the last step range (the cut one ends at 41): the profiler's stop synchronizes
    t.launch(39.5, 40, 5)
    t.runtime("cudaDeviceSynchronize", 42, 10)
    t.launch(50, 52, 1)
    r = analyze_traces(tmp_path, t).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 0.0
    assert r.other_reasons == {"device sync after the last step (profiler closing its window)": 1}
    assert r.idle_by_cause_us()["other"] == 7.0  # gap 45-52
    (s,) = r.syncs
    assert (s.count, s.idle_caused_us) == (1, 0.0)
