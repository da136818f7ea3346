"""A rank's session in one process (CPU): the window when step sources switch, ``--trace
none``, status records (exit codes, signals first), and the launcher's end-of-run summary."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import profplug
import profplug.steps as steps
from profplug import autosteps
from profplug.config import Config
from profplug.session import exitcode, outcome, recorders
from profplug.session.core import Session


def user_annotations(path: Path) -> list[str]:
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    return [e["name"] for e in sorted(events, key=lambda e: e["ts"])
            if e.get("cat") == "user_annotation"]


def test_the_jobs_steps_replace_a_window_opened_by_megatron_steps(session_for, tmp_path) -> None:
    s = session_for(tmp_path, skip=1, steps=2)
    fwd = autosteps.step_wrapper(lambda: None, autosteps.Target("m:f", steps.LIBRARY, "megatron"))
    fwd()
    fwd()  # auto step 1 opened the window
    assert s.recorder.running and s.window.first_step == 1
    for _ in range(4):
        with profplug.step():
            fwd()
    s.flush()
    names = user_annotations(tmp_path / "kineto" / "rank0.json.gz")
    assert [n for n in names if n.startswith("ProfilerStep#")] == ["ProfilerStep#1",
                                                                   "ProfilerStep#2"]
    assert names.count("profplug.step") == 2
    status = json.loads((tmp_path / "status" / "rank0.json").read_text())
    w = status["window"]
    assert (w["step_source"], w["first_step"], w["steps"]) == ("manual", 1, 2)
    assert w["discarded"] == [{"window": "2 steps from megatron (manual took control)",
                               "steps": 1, "first_step": 1}]


@pytest.mark.parametrize(("trace", "still_running"), [("nsys", True), ("kineto", False)])
def test_a_window_given_up_keeps_only_an_nsys_capture_open(
        session_for, tmp_path, trace, still_running) -> None:
    s = session_for(tmp_path, trace=trace, skip=1, steps=2)
    fwd = autosteps.step_wrapper(lambda: None, autosteps.Target("m:f", steps.LIBRARY, "megatron"))
    fwd()
    fwd()  # auto step 1 opened the window
    with profplug.step():  # the job's steps take over: the window is given up
        assert s.recorder.running is still_running and s.window.first_step is None
    s.flush()
    status = json.loads((tmp_path / "status" / "rank0.json").read_text())
    assert [d["window"] for d in status["window"]["discarded"]] == [
        "2 steps from megatron (manual took control)"]


def test_the_first_activity_opens_a_whole_run_window_and_the_session_stops_listening(
        session_for, tmp_path) -> None:
    # given a rank's session listening to the p2p/synchronize calls, as bootstrap registers it
    s = session_for(tmp_path, trace="none", skip=1, steps=2)
    steps.add_listener(on_activity=s.on_activity)
    try:
        # when the job makes its first p2p call, and more
        steps.on_activity()
        assert s.window.mode == "run"
        # then the session no longer listens (its one call opened the window)
        assert s.on_activity not in steps._on_activity
        steps.on_activity()
        assert s.window.mode == "run"
    finally:
        steps.remove_listener(on_activity=s.on_activity)
    s.flush()


def test_only_nsys_ranks_meet_again_before_the_window_stops(session_for, tmp_path) -> None:
    met: dict[str, list[int]] = {}
    for trace in ("nsys", "kineto", "none"):
        s = session_for(tmp_path / trace, trace=trace, skip=1, steps=2)
        s.alignment.meet = lambda rank, t=trace: met.setdefault(t, []).append(steps.count())
        for _ in range(4):
            profplug.step()
        s.flush()
    # steps seen at each meeting: the begin of step 1 (the window's first); for nsys, the
    # end of step 2 (its last) too, before the capture ends for all ranks
    assert met == {"nsys": [2, 3], "kineto": [2], "none": [2]}


def test_trace_none_times_the_window_and_writes_no_trace(session_for, tmp_path,
                                                         monkeypatch) -> None:
    # given a host clock that only moves inside the steps, step k taking 2**k s
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(recorders, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    s = session_for(tmp_path, trace="none", skip=2, steps=3)
    for k in range(8):
        with profplug.step():
            clock.now += 2.0 ** k
    s.flush()
    assert not (tmp_path / "kineto").exists()
    status = json.loads((tmp_path / "status" / "rank0.json").read_text())
    w = status["window"]
    assert (status["status"], status["trace"], w["mode"], w["first_step"], w["steps"]) == (
        "finished", None, "steps", 2, 3)
    # then the window's wall time is exactly steps 2, 3 and 4's: 4 + 8 + 16 s (any other
    # set of steps sums to another number)
    assert w["wall_s"] == 28.0


def test_status_records_the_exit_code_of_sys_exit(session_for, tmp_path) -> None:
    s = session_for(tmp_path, trace="none")
    original = sys.exit
    exitcode.install(s.end)
    try:
        with pytest.raises(SystemExit):
            sys.exit(2)
    finally:
        exitcode.uninstall()
    assert s.end.exit_code == 2 and sys.exit is original
    s.flush()
    status = json.loads((tmp_path / "status" / "rank0.json").read_text())
    assert (status["status"], status["exit_code"], status["signal"]) == ("exit", 2, None)


def test_on_a_signal_the_status_is_written_before_the_recorder_stops(
        session_for, tmp_path, monkeypatch) -> None:
    s = session_for(tmp_path, trace="none")
    path = tmp_path / "status" / "rank0.json"
    written: list[str] = []  # the status file as it is when the recorder is stopped
    monkeypatch.setattr(s.recorder, "stop",
                        lambda *a, **k: written.append(json.loads(path.read_text())["status"]))
    s.recorder.running = True
    s.end.signal = 15
    s.flush("signal 15", from_signal=True)
    status = json.loads(path.read_text())
    assert (status["status"], status["signal"], status["exit_code"]) == ("signal", 15, None)
    assert written == ["signal"]


def test_a_rank_with_rank_env_leaves_a_running_record_at_start(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    Session(Config(out=str(tmp_path), trace="none"))
    status = json.loads((tmp_path / "status" / "rank3.json").read_text())
    assert (status["status"], status["world_size"], status["versions"]) == ("running", 4, None)
    ranks = [status]
    outcome.settle(ranks, job_pid=None, exit_status=1)
    assert ranks[0]["status"] == "lost"
    assert outcome.failure_lines(ranks) == [f"rank 3: lost: {outcome.LOST_REASON}"]


@pytest.mark.parametrize(("code", "status"), [
    (None, 0), (0, 0), (2, 2), (True, 1), (256, 0), (-1, 255), ("bye", 1)])
def test_exit_status_of_system_exit(code, status) -> None:
    assert exitcode.status_of(code) == status


def test_settle_and_failure_lines() -> None:
    ranks = [
        {"rank": 0, "pid": 10, "status": "finished"},
        {"rank": 1, "pid": 11, "status": "exception", "exception": "ValueError: x"},
        {"rank": 2, "pid": 12, "status": "signal", "signal": 15},
        {"file": "rank9.json", "status": "unreadable", "error": "bad json"},
    ]
    outcome.settle(ranks, job_pid=10, exit_status=3)  # rank 0 is the job's process
    assert (ranks[0]["status"], ranks[0]["exit_code"]) == ("exit", 3)
    assert outcome.failure_lines(ranks) == [
        "rank 0: exit: exit code 3", "rank 1: exception: ValueError: x",
        "rank 2: signal: SIGTERM", "rank9.json: unreadable: bad json"]
    kept = [{"rank": 0, "pid": 10, "status": "finished"}]
    outcome.settle(kept, job_pid=10, exit_status=130)  # a signal's status: not an exit code
    assert kept[0]["status"] == "finished"


def test_step_fn_warnings_only_for_names_no_rank_called() -> None:
    ranks = [{"step_fns": [{"name": "m:f", "patched": True, "calls": 0},
                           {"name": "m:g", "patched": True, "calls": 0}]},
             {"step_fns": [{"name": "m:f", "patched": True, "calls": 4},
                           {"name": "m:g", "patched": True, "calls": 0}]}]
    assert outcome.step_fn_warnings(["m:f", "m:g", "n:h"], ranks) == [
        "--step-fn m:g: never called; no steps came from it",
        "--step-fn n:h: no rank reported on it (did any rank import torch?); "
        "no steps came from it"]
