"""What-if: the host work a dropped synchronize takes with it (hand-computed, times in us).

Every trace: a host-bound loop of 3 steps of 100 us on one stream: a launch at T (5 us call,
10 us kernel at T+5), then the synchronize, then host work until the next step at T+100.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.whatif import HostCosts, whatif
from synth import KinetoTrace

SYNC_RANGE = "profplug.synchronize examples/x.py:7 f"


def loop(tmp: Path, own_range: bool, extra_call: bool = False, entry: float = 25.0) -> Path:
    """The sync (10 us, not blocking) at T+5+entry+10 inside its own 30 us range that starts
    ``entry`` us after the launch call ends (20 us of it is the range's overhead)."""
    t = KinetoTrace(rank=0)
    for i in range(3):
        T = 100.0 * i
        t.annotation(f"ProfilerStep#{i}", T, 100.0)
        t.launch(T, T + 5, 10.0, api_dur=5.0)
        r0 = T + 5 + entry
        if own_range:
            t.annotation(SYNC_RANGE, r0, 30.0)
        if extra_call:  # another call inside the range: it is not the sync's own range
            t.runtime("cudaEventRecord", r0 + 2, 1.0)
        t.runtime("cudaDeviceSynchronize", r0 + 10, 10.0)
    return t.write(tmp / "loop.json")


def _rank(path: Path):
    return whatif([read_kineto(path, 0)]).rank(0)


def test_own_range_and_entry_go_with_the_dropped_sync(tmp_path: Path) -> None:
    r = _rank(loop(tmp_path, own_range=True))
    # recorded periods 100, 100 (the last step has no next one)
    assert r.recorded_us == pytest.approx(100.0, abs=1e-3)
    assert r.replayed_us == pytest.approx(100.0, abs=1e-3)
    # per step: launch 5; gap 35 less 10 (range start to the call) less 20 (the entry, 25,
    # capped at the range's 20 us overhead) = 5; the sync 0; gap 50 less 10 (call end to
    # range end) = 40: steps of 50 us
    assert r.predicted_us == pytest.approx(50.0, abs=1e-3)


def test_entry_is_the_gap_when_below_the_range_overhead(tmp_path: Path) -> None:
    r = _rank(loop(tmp_path, own_range=True, entry=8.0))
    # gap before the call 18 - 10 - 8 = 0; after: 50 + 17 - 10 = 57; steps 62 us
    assert r.recorded_us == pytest.approx(100.0, abs=1e-3)
    assert r.predicted_us == pytest.approx(62.0, abs=1e-3)


def test_a_bare_sync_takes_only_its_own_cost(tmp_path: Path) -> None:
    r = _rank(loop(tmp_path, own_range=False))
    # the 10 us call goes; both host gaps stay: steps of 90 us
    assert r.predicted_us == pytest.approx(90.0, abs=1e-3)


def test_a_range_holding_other_calls_is_not_the_syncs_own(tmp_path: Path) -> None:
    r = _rank(loop(tmp_path, own_range=True, extra_call=True))
    # the cudaEventRecord shares the range: only the sync's 10 us go
    assert r.predicted_us == pytest.approx(90.0, abs=1e-3)


def copy_loop(tmp: Path, copy_name: str) -> Path:
    """GPU-bound steps of 100 us: kernel T+5..T+85 (launched at T), a device sync T+2..T+90,
    then a DtoH copy call T+91..T+97 whose copy runs T+93..T+95."""
    t = KinetoTrace(rank=0)
    for i in range(3):
        T = 100.0 * i
        t.annotation(f"ProfilerStep#{i}", T, 100.0)
        t.launch(T, T + 5, 80.0)
        t.runtime("cudaDeviceSynchronize", T + 2, 88.0)
        corr = t.runtime("cudaMemcpyAsync", T + 91, 6.0)
        t.gpu(T + 93, 2.0, copy_name, corr=corr, cat="gpu_memcpy")
    return t.write(tmp / "copy.json")


@pytest.mark.parametrize(("name", "waits"), [
    ("Memcpy DtoH (Device -> Pageable)", True),  # Kineto says pageable: synchronous
    ("[CUDA memcpy DtoH]", True),  # no memory kind: every call returned after its copy
    ("Memcpy DtoH (Device -> Pinned)", False),  # pinned: asynchronous
])
def test_a_synchronous_copy_keeps_the_host_waiting(tmp_path: Path, name: str,
                                                   waits: bool) -> None:
    res = whatif([read_kineto(copy_loop(tmp_path, name), 0)])
    r = res.rank(0)
    assert r.recorded_us == pytest.approx(100.0, abs=1e-3)
    assert r.replayed_us == pytest.approx(r.recorded_us, abs=1e-3)
    if waits:  # the copy call ends 4 us after the kernel; launches 3 us later; kernel +5
        assert r.predicted_us == pytest.approx(92.0, abs=1e-3)
        assert any("device-to-host copy" in a for a in res.assumptions)
    else:  # the host runs ahead: kernels and copies back to back
        assert r.predicted_us == pytest.approx(82.0, abs=1e-3)


@pytest.mark.parametrize("host", [HostCosts(gap_scale=2.0, call_scale=2.0),
                                  HostCosts(ranks={0: (2.0, 2.0)})])
def test_host_costs_scale_only_the_prediction(tmp_path: Path, host: HostCosts) -> None:
    res = whatif([read_kineto(loop(tmp_path, own_range=False), 0)], host=host)
    r = res.rank(0)
    assert r.replayed_us == pytest.approx(100.0, abs=1e-3)  # the replay as recorded: as traced
    # per step: launch 2 x 5, gaps 2 x 35 and 2 x 50, the dropped sync 0: 180 us
    assert r.predicted_us == pytest.approx(180.0, abs=1e-3)


def test_step_boundaries_follow_a_scaled_host(tmp_path: Path) -> None:
    """A step range ending early in a host gap stays after the step's last call when the
    gap shrinks (``HostCosts``): its ops stay in the step (they fell out of it before)."""
    t = KinetoTrace(rank=0)
    for i in range(3):  # launch A at T, B at T+60 (5 us calls); the step ends at T+70
        T = 100.0 * i
        t.annotation(f"ProfilerStep#{i}", T, 70.0)
        t.launch(T, T + 5, 10.0, api_dur=5.0)
        t.launch(T + 60, T + 65, 10.0, api_dur=5.0)
    t.runtime("cudaStreamIsCapturing", 300.0, 1.0)  # host work after the last step
    tl = read_kineto(t.write(tmp_path / "steps.json"), 0)
    r = whatif([tl], host=HostCosts(0.25, 0.25)).rank(0)
    # recorded periods: 100, 100
    assert r.replayed_us == pytest.approx(100.0, abs=1e-3)
    # host steps of 25 us (calls 1.25, gaps 13.75 and 8.75; the 5 us launch latency kept):
    # 25, 25, and the last step from A's kernel (55) to B's kernel end (80)
    assert r.predicted_us == pytest.approx(25.0, abs=1e-3)


def test_unprofiled_calibrates_the_host_on_the_device_step(tmp_path: Path) -> None:
    from profplug.analyzers.whatif import whatif_unprofiled

    tl = read_kineto(loop(tmp_path, own_range=False), 0)
    # traced: host steps of 100 us (launch 5, gap 35, sync 10, gap 50): 100 us periods.
    # Unprofiled 35 us: 100 s = 35 -> s = 0.35; without the sync the host step is 90 s =
    # 31.5 us
    res = whatif_unprofiled([tl], 35.0)
    r = res.rank(0)
    assert r.recorded_us == 35.0 and abs(r.replayed_us - 35.0) <= 0.05
    assert r.predicted_us == pytest.approx(31.5, abs=0.1)
    assert r.saving_us == pytest.approx(35.0 - r.predicted_us, abs=1e-3)
    assert any("unprofiled: the host's costs of every rank are scaled by 0.35" in a for a in res.assumptions)


def test_unprofiled_band_carries_the_calibration_steps_ci(tmp_path: Path) -> None:
    """With the unprofiled step's CI the band adds the prediction's change across it."""
    from profplug.analyzers.whatif import whatif_unprofiled
    from profplug.analyzers.whatif.unprofiled import UNPROFILED_BAND_PCT

    tl = read_kineto(loop(tmp_path, own_range=False), 0)
    plain = whatif_unprofiled([tl], 35.0).rank(0)
    res = whatif_unprofiled([tl], 35.0, step_ci_us=(30.0, 40.0))
    r = res.rank(0)
    assert r.predicted_us == pytest.approx(plain.predicted_us, abs=1e-3)
    # s = 0.3 at 30 us, 0.4 at 40 us (see above): predictions 90 s = 27 and 36 against
    # 31.5: the band carries 4.5 / 31.5 = 14.3% instead of the default
    cal = 100 * 4.5 / 31.5
    assert r.error_band_pct - plain.error_band_pct == pytest.approx(
        cal - UNPROFILED_BAND_PCT, abs=0.2)
    assert any("over the step's 95% CI (30.0-40.0 us): up to 14.3%" in a
               for a in res.assumptions)


def test_unprofiled_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from profplug.cli.main import main

    path = str(loop(tmp_path, own_range=False))
    assert main(["whatif", path, "--unprofiled", "35", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)["whatif"]
    assert d["ranks"][0]["recorded_us"] == 35.0 and d["ranks"][0]["error_band_pct"] > 5.0
    assert main(["whatif", path, "--unprofiled", "0"]) == 2
    assert "--unprofiled" in capsys.readouterr().err


def test_a_step_range_is_never_a_calls_own_range() -> None:
    from profplug.analyzers.core.timeline import TimelineBuilder
    from profplug.analyzers.graph.host import drop_cuts

    b = TimelineBuilder()
    b.ann(0, 100_000, 1, "profplug.step")  # the step holds only the synchronize
    b.ann(30_000, 60_000, 1, SYNC_RANGE)
    b.api(40_000, 50_000, 1, "cudaDeviceSynchronize", 7)
    tl = b.build(rank=0, source="kineto", files=[])
    pre, post = drop_cuts(tl, [np.array([0])], np.array([True]))
    # the sync's range is its own (10 us before the call, 10 after; the entry: from the
    # step's start, the previous host event, capped at the range's 20 us overhead), the step
    # around it is not
    assert (int(pre[0]), int(post[0])) == (10_000 + 20_000, 10_000)
    b2 = TimelineBuilder()
    b2.ann(0, 100_000, 1, "ProfilerStep#3")
    b2.api(40_000, 50_000, 1, "cudaDeviceSynchronize", 7)
    tl2 = b2.build(rank=0, source="kineto", files=[])
    pre, post = drop_cuts(tl2, [np.array([0])], np.array([True]))
    assert (int(pre[0]), int(post[0])) == (0, 0)


def test_a_range_with_much_other_host_work_is_not_a_wrapper() -> None:
    from profplug.analyzers.core.timeline import TimelineBuilder
    from profplug.analyzers.graph.host import OWN_RANGE_MAX_NS, drop_cuts

    b = TimelineBuilder()
    b.ann(0, 20_000 + OWN_RANGE_MAX_NS, 1, "sample_tokens")  # CPU work, then the sync
    b.api(OWN_RANGE_MAX_NS, OWN_RANGE_MAX_NS + 10_000, 1, "cudaDeviceSynchronize", 7)
    tl = b.build(rank=0, source="kineto", files=[])
    pre, post = drop_cuts(tl, [np.array([0])], np.array([True]))
    assert (int(pre[0]), int(post[0])) == (0, 0)


def test_step_boundaries_in_a_long_host_gap_keep_their_place() -> None:
    # given two calls 15 s apart and a step boundary 5 s into the gap (5e9 x 15e9 ns wraps
    # int64 when multiplied)
    from types import SimpleNamespace

    from profplug.analyzers.whatif.predicted_timeline import moved_with_calls

    rec = SimpleNamespace(a_start=np.array([0, 15_000_000_000]),
                          a_end=np.array([1_000, 15_000_001_000]))
    half = SimpleNamespace(a_start=np.array([0, 7_500_000_000]),
                           a_end=np.array([1_000, 7_500_001_000]))
    t = np.array([500, 5_000_000_000, 15_000_000_500], dtype=np.int64)
    # when replayed as recorded, and with the gap halved
    same = moved_with_calls(rec, rec, [0, 1], t)
    shorter = moved_with_calls(rec, half, [0, 1], t)
    # then the boundary stays put, or keeps its fraction (1/3) of the gap: no wrap-around
    assert same.tolist() == t.tolist()
    assert shorter.tolist() == [500, 1_000 + round(4_999_999_000 * 7_499_999_000
                                                   / 14_999_999_000), 7_500_000_500]
