"""compare's two synthetic runs (``synth.write_run``: a device-sync run of 100 us steps, an
event-sync run of 80 us steps, two ranks each) have the answers worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from profplug.analyzers.report.analysis import analyze
from synth import N_STEPS, write_run


def test_device_run_has_the_known_answer(tmp_path: Path) -> None:
    # given a synthetic device-sync run, when analyzed
    rep = analyze([write_run(tmp_path, "device")])
    # then each rank has N-1 gaps of 30 us, all device_sync, and 100 us steps
    for r in rep.ranks:
        assert r.idle_by_cause_us()["device_sync"] == pytest.approx(30.0 * (N_STEPS - 1))
        assert r.total("idle_us") == pytest.approx(30.0 * (N_STEPS - 1))
        assert r.steps is not None and r.steps.step_us_mean == pytest.approx(100.0)
        assert r.steps.idle_per_step_us["device_sync"] == pytest.approx(30.0)  # median
        assert r.steps.idle_per_step_us_mean["device_sync"] == pytest.approx(24.0)
        assert r.windows_ns[0][1] - r.windows_ns[0][0] == round(r.total("window_us") * 1000)


def test_event_run_has_the_known_answer(tmp_path: Path) -> None:
    rep = analyze([write_run(tmp_path, "event")])
    ic0, ic1 = rep.rank(0).idle_by_cause_us(), rep.rank(1).idle_by_cause_us()
    assert ic0["host_bound"] == pytest.approx(40.0) and ic0["device_sync"] == 0
    assert ic1["event_sync"] == pytest.approx(40.0) and ic1["device_sync"] == 0
    assert rep.rank(1).steps is not None and rep.rank(1).steps.step_us_mean == 80.0
