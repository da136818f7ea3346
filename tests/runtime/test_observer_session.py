"""The observer effect inside one rank's session: which steps are timed untraced (after the
warm-up, before the step that prepares the profiler; after the window and its settle step)
and that they are timed with the window's clock. In-process, with a fake clock."""

from __future__ import annotations

import json
import time

from profplug.analyzers.steps.observer import observer_from_ranks

import profplug


def test_untraced_steps_around_the_window_are_timed(session_for, tmp_path, monkeypatch) -> None:
    now = [0]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: now[0])
    s = session_for(tmp_path, skip=6, steps=2)  # Kineto: a traced run
    for i in range(13):  # step i lasts (i + 1) us on the fake clock
        with profplug.step():
            now[0] += (i + 1) * 1000
    s.flush()
    status = json.loads((tmp_path / "status" / "rank0.json").read_text())
    u = status["untraced"]
    # warm-up 0-2; 3 and 4 timed; 5 prepares the profiler; window 6-7; 8 settles; 9-10 timed
    assert (u["warmup_steps"], u["before"]["step_us"], u["after"]["step_us"]) == (
        3, [4.0, 5.0], [10.0, 11.0])
    assert status["timing"]["step_us"] == [7.0, 8.0]
    assert u["before"]["clock"] == u["after"]["clock"] == status["timing"]["clock"] == "host"
    assert status["window"]["steps_seen"] == 13
    obs = observer_from_ranks([status])
    # 2 steps before the window are too few for a baseline alone: the ones after it (10, 11)
    assert obs is not None and obs["line"] == (
        "traced steps: median 7.5 us; untraced (after the window): 10.5 us (-28.6%)")


def test_a_run_without_a_profiler_times_no_untraced_steps(session_for, tmp_path) -> None:
    s = session_for(tmp_path, trace="none", skip=2, steps=2)
    for _ in range(8):
        profplug.step()
    s.flush()
    status = json.loads((tmp_path / "status" / "rank0.json").read_text())
    assert status["untraced"] is None and status["timing"] is None
