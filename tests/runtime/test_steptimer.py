"""The step timer (``PROFPLUG_STEP_TIMING``): host times on the CPU, CUDA events through a
fake ``torch.cuda.Event`` (no GPU here), and its place in a rank's session. Its cost per mark
is measured by ``benchmarks/bench_ab_timing.py`` (wall-clock bounds flake on a shared machine)."""

from __future__ import annotations

import json

import pytest
import torch

import profplug
import profplug.steps as steps
from profplug.session import steptimer
from profplug.session.steptimer import StepTimer


class FakeEvent:
    """Stands in for ``torch.cuda.Event``: a record takes the fake GPU clock's time."""

    created = 0
    clock_ms = 0.0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        FakeEvent.created += 1
        self.t: float | None = None
        self.records = 0
        self.streams: list[object] = []

    def record(self, stream: object = None) -> None:
        assert stream is not None  # the timer always names the stream
        self.t = FakeEvent.clock_ms
        self.records += 1
        self.streams.append(stream)

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.t is not None and end.t is not None
        return end.t - self.t


class FakeStreams:
    """The current stream: a raw handle (cheap to read) and its ``Stream`` (a look-up)."""

    def __init__(self) -> None:
        self.current = 0x1000
        self.lookups = 0

    def raw(self, device: int) -> int:
        assert device == 3
        return self.current

    def stream(self, device: int) -> tuple[str, int]:
        assert device == 3
        self.lookups += 1
        return ("stream", self.current)


@pytest.fixture
def fake_cuda(monkeypatch):
    syncs: list[int] = []
    FakeEvent.created, FakeEvent.clock_ms = 0, 0.0
    streams = FakeStreams()
    monkeypatch.setattr(steptimer, "_cuda_in_use", lambda: True)
    monkeypatch.setattr(steptimer, "_device", lambda: 3)
    monkeypatch.setattr(steptimer, "_raw_stream_fn", lambda: streams.raw)
    monkeypatch.setattr(steptimer, "_stream", streams.stream)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr("profplug.p2p.original_synchronize", lambda: lambda: syncs.append(1))
    return syncs, streams


def test_host_timer_measures_each_step_between_boundaries(monkeypatch) -> None:
    # a host clock that moves only between the marks (a sleep would flake on a busy machine)
    now = [10**12]
    monkeypatch.setattr(steptimer.time, "perf_counter_ns", lambda: now[0])
    t = StepTimer(3, "events")  # no CUDA here: host only
    for pause_ns in (2_000_000, 4_000_000, 1_000_500):
        t.mark()
        now[0] += pause_ns
    t.mark()
    res = t.result()
    assert (res["clock"], res["steps"], res["complete"], res["error"]) == ("host", 3, True, None)
    assert res["step_us"] == res["host_step_us"] == [2000.0, 4000.0, 1000.5]


def test_cuda_events_are_made_before_the_window_and_read_after_it(fake_cuda) -> None:
    t = StepTimer(4, "events")
    assert t.clock == "cuda_event" and FakeEvent.created == 5
    assert all(ev.records == 1 for ev in t.events)  # created on the device now
    for gpu_ms in (0.0, 1.5, 3.0, 3.25, 5.0):  # GPU times at the 5 boundaries
        FakeEvent.clock_ms = gpu_ms
        t.mark()
    syncs, streams = fake_cuda
    assert FakeEvent.created == 5 and syncs == []  # no event made, no sync in the loop
    assert streams.lookups == 1  # the Stream looked up once, at window start
    res = t.result()
    assert res["clock"] == "cuda_event" and res["step_us"] == [1500.0, 1500.0, 250.0, 1750.0]
    assert len(res["host_step_us"]) == 4 and syncs == [1]  # one synchronize, after
    assert res["stream_switches"] == 0


def test_extra_marks_are_ignored_and_a_short_window_keeps_its_complete_steps(fake_cuda) -> None:
    t = StepTimer(2, "events")
    for _ in range(5):
        t.mark()
    assert t.marks == 3 and t.result()["steps"] == 2
    short = StepTimer(5, "events")
    for _ in range(3):
        short.mark()
    res = short.result()
    assert (res["steps"], res["complete"], res["requested_steps"]) == (2, False, 5)


def test_from_a_signal_the_events_are_not_read(fake_cuda) -> None:
    t = StepTimer(1, "events")
    t.mark()
    t.mark()
    res = t.result(cuda_calls=False)
    assert res["clock"] == "host" and "signal" in res["error"] and fake_cuda[0] == []


def test_a_mark_records_on_the_current_stream_and_looks_it_up_only_when_it_changed(
        fake_cuda) -> None:
    _, streams = fake_cuda
    t = StepTimer(4, "events")
    t.mark()
    t.mark()
    streams.current = 0x2000  # the job switched streams inside the window
    t.mark()
    t.mark()
    streams.current = 0x1000  # and back
    t.mark()
    assert [ev.streams[-1] for ev in t.events] == [
        ("stream", 0x1000), ("stream", 0x1000), ("stream", 0x2000), ("stream", 0x2000),
        ("stream", 0x1000)]
    assert streams.lookups == 3 and t.result()["stream_switches"] == 2


def test_the_event_is_recorded_through_its_c_level_record(monkeypatch) -> None:
    """``torch.cuda.Event.record`` (Python) looks the current stream up; the timer binds the
    base class's C-level record once and passes the cached stream."""
    calls: list[tuple[object, object]] = []

    class Base:
        def record(self, stream):
            calls.append((self, stream))

    class Event(Base):
        def record(self, stream=None):
            raise AssertionError("the Python layer is skipped")

    monkeypatch.setattr(torch._C, "_CudaEventBase", Base)
    ev = Event()
    steptimer._c_record(ev)("s")
    assert calls == [(ev, "s")]
    other = FakeEvent(enable_timing=True)
    assert steptimer._c_record(other) == other.record  # not an event of that base


def test_host_mode_makes_no_event(fake_cuda) -> None:
    t = StepTimer(2, "host")
    assert t.events is None and t.clock == "host" and FakeEvent.created == 0


@pytest.fixture
def session_for(session_for):
    """The shared fixture (conftest.py) with no profiler: the timer alone."""
    return lambda tmp, **kw: session_for(tmp, **{"trace": "none", **kw})


def test_session_times_exactly_the_window_steps(session_for, tmp_path, monkeypatch) -> None:
    # a host clock that moves only inside the steps (a sleep would flake on a busy machine)
    now = [0]
    monkeypatch.setattr(steptimer.time, "perf_counter_ns", lambda: now[0])
    s = session_for(tmp_path, skip=2, steps=3, step_timing="events")
    pauses = [0.0, 0.0, 0.003, 0.006, 0.001, 0.0, 0.0]
    for pause in pauses:
        with profplug.step():
            now[0] += round(pause * 1e9)
    assert s.clocks.window is None  # closed with the window
    s.flush()
    status = json.loads((tmp_path / "status" / "rank0.json").read_text())
    timing = status["timing"]
    assert (timing["steps"], timing["complete"], timing["clock"]) == (3, True, "host")
    assert [round(x, -3) // 1000 for x in timing["step_us"]] == [3, 6, 1]
    assert status["window"]["first_step"] == 2 and status.get("digest") is None


def test_a_job_ending_inside_the_window_keeps_its_complete_steps(session_for, tmp_path) -> None:
    s = session_for(tmp_path, skip=1, steps=10, step_timing="host")
    for _ in range(4):  # steps 1, 2, 3 of the window began; 3 never ended by itself
        profplug.step()
    s.flush()
    timing = json.loads((tmp_path / "status" / "rank0.json").read_text())["timing"]
    assert (timing["steps"], timing["complete"]) == (2, False)


def test_timing_off_writes_none(session_for, tmp_path) -> None:
    s = session_for(tmp_path, skip=0, steps=2)
    for _ in range(3):
        profplug.step()
    s.flush()
    assert json.loads((tmp_path / "status" / "rank0.json").read_text())["timing"] is None


def test_a_window_given_up_for_a_higher_step_source_is_not_timed(session_for, tmp_path) -> None:
    from profplug import autosteps

    s = session_for(tmp_path, skip=1, steps=2, step_timing="host")
    fwd = autosteps.step_wrapper(lambda: None, autosteps.Target("m:f", steps.LIBRARY, "megatron"))
    fwd()
    fwd()
    assert s.clocks.window is not None and s.clocks.window.marks == 1
    for _ in range(4):
        with profplug.step():
            fwd()
    s.flush()
    timing = json.loads((tmp_path / "status" / "rank0.json").read_text())["timing"]
    assert timing["steps"] == 2 and timing["complete"]
