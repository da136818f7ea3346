"""Host calls nested in others (a driver call inside a runtime call, ``cudaGetDevice``
inside a launch): given such a trace, Kineto or Nsight, when the report analyzes it, then
stalls, sync counts, call sites and steps count each top-level call once, charge its time
once, and give the idle to the top-level call, whose kind is the strongest sync in it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from default_report import default_report
from hypothesis import given, settings
from hypothesis import strategies as st
from profplug.analyzers import StallOptions, analyze
from profplug.analyzers.core.classify import (
    DEVICE,
    EVENT,
    NONE,
    STREAM_WAIT,
    base_name,
    top_level_kinds,
)
from profplug.analyzers.report.analysis import Report
from profplug.analyzers.report.frames import gaps_frame
from profplug.analyzers.scale.load import load_timelines
from synth import KinetoTrace, NsysExport, check_sums

from profplug.cli.main import main

Recorder = Any  # KinetoTrace or NsysProcess: same recording methods
DRIVER = "cuda_driver"  # Kineto's category of driver calls (Nsight: the same runtime table)


def nested_scenario(t: Recorder) -> None:
    """Three syncs and a stream wait, each holding a nested driver call (times in us)."""
    t.annotation("profplug.step", 0, 24)
    t.annotation("profplug.step", 24, 21)  # 24..45
    t.launch(0, 0, 10)  # GPU 0-10
    t.annotation("profplug.recv_from_prev_pipeline_rank_", 4, 14)
    t.annotation("profplug.sync.device", 5, 12)
    t.runtime("cudaDeviceSynchronize", 5, 12)  # blocked 5-17: 12 us
    t.runtime("cuCtxSynchronize", 6, 10, cat=DRIVER)  # nested: 10 us, not counted again
    corr = t.runtime("cudaLaunchKernel", 18, 3)  # 18-21, with a nested cudaGetDevice
    t.runtime("cudaGetDevice", 19, 1)
    t.gpu(20, 4, corr=corr)  # GPU 20-24; gap 10-20 -> device_sync (cudaDeviceSynchronize)
    t.launch(24, 24, 4)  # GPU 24-28
    t.runtime("cudaFree", 25, 8)  # 25-33: no sync by name, a device sync by what it holds
    t.runtime("cuCtxSynchronize", 26, 6, cat=DRIVER)
    t.launch(34, 35, 2)  # gap 28-35 -> device_sync (cudaFree); GPU 35-37
    t.runtime("cudaStreamSynchronize", 36, 4)  # 36-40
    t.runtime("cuStreamSynchronize", 36.5, 3, cat=DRIVER)
    # gap 37-42 starts in cudaStreamSynchronize, which blocked 4 us: 4 us event_sync, the
    # last 1 us (after it returned, the host launching) host_bound; GPU 42-44
    t.launch(41, 42, 2)
    t.runtime("cudaStreamWaitEvent", 42.5, 1)
    t.runtime("cuStreamWaitEvent", 42.7, 0.6, cat=DRIVER)


def kineto(tmp_path: Path) -> Path:
    t = KinetoTrace(rank=0)
    nested_scenario(t)
    return t.write(tmp_path / "nested.json")


def nsys(tmp_path: Path) -> Path:
    ex = NsysExport()
    nested_scenario(ex.process(4242))
    return ex.write(tmp_path / "nested.sqlite")


def report(path: Path) -> Report:
    rep = analyze([path], StallOptions(), jobs=1)
    check_sums(rep)
    return rep


@pytest.mark.parametrize("write", [kineto, nsys])
def test_each_top_level_call_counted_once_and_charged_the_idle(tmp_path: Path, write: Any
                                                                ) -> None:
    r = report(write(tmp_path)).rank(0)
    assert r.idle_by_cause_us() == {"device_sync": 17.0, "event_sync": 4.0,
                                    "host_bound": 1.0, "other": 0.0}
    got = [(s.api, s.kind, s.count, s.host_blocked_us, s.idle_caused_us) for s in r.syncs]
    assert got == [("cudaDeviceSynchronize", "device", 1, 12.0, 10.0),  # not 2 syncs, 22 us
                   ("cudaFree", "device", 1, 8.0, 7.0),
                   ("cudaStreamSynchronize", "event", 1, 4.0, 4.0),
                   ("cudaStreamWaitEvent", "stream_wait", 1, 1.0, 0.0)]
    sites = [(c.callsite, c.api, c.count, c.idle_caused_us, c.host_blocked_us)
             for c in r.callsites]
    assert sites == [("profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device",
                      "cudaDeviceSynchronize", 1, 10.0, 12.0),
                     ("profplug.step", "cudaFree", 1, 7.0, 8.0),
                     ("profplug.step", "cudaStreamSynchronize", 1, 4.0, 4.0)]
    assert r.steps is not None and r.steps.n_steps == 2
    # the median over the steps that have a next step (the last has no period): step 0 alone
    assert r.steps.idle_per_step_us["device_sync"] == 10.0
    assert r.callsites_failed is None


@pytest.mark.parametrize("write", [kineto, nsys])
def test_gaps_charged_to_the_top_level_calls(tmp_path: Path, write: Any) -> None:
    rep = report(write(tmp_path))
    g = gaps_frame(rep)
    # the stream sync's gap is cut where its 4 us of blocking end: the rest is the host's
    assert [base_name(a) for a in g["api"]] == ["cudaDeviceSynchronize", "cudaFree",
                                                "cudaStreamSynchronize", ""]
    assert g["dur_us"].tolist() == [10.0, 7.0, 4.0, 1.0]


def test_top_level_kind_is_the_strongest_nested_in_it() -> None:
    # 0 launch > 1 (none); 2 stream wait > 3 event sync; 4 event > 5 device; 6 none alone
    kind = np.array([NONE, NONE, STREAM_WAIT, EVENT, EVENT, DEVICE, NONE], dtype=np.int8)
    top = np.array([0, 0, 2, 2, 4, 4, 6])
    assert top_level_kinds(kind, top).tolist() == [NONE, NONE, EVENT, NONE, DEVICE, NONE,
                                                   NONE]


@pytest.mark.parametrize("write", [kineto, nsys])
def test_the_default_report_renders_every_format(tmp_path: Path, write: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # given the nested-call trace, when the default report runs (what-if included)
    path = write(tmp_path)
    for fmt in ("table", "json", "csv"):
        out = tmp_path / f"out.{fmt}"
        rc = main(["report", str(path), "-f", fmt, "-o", str(out),
                   "--html", str(tmp_path / "out.html")])
        # then exit 0, no traceback, the what-if there and no warning of it failing
        err = capsys.readouterr().err
        assert rc == 0 and "Traceback" not in err + out.read_text()
    doc = json.loads((tmp_path / "out.json").read_text())
    assert "whatif" in doc and not [w for w in doc["warnings"] if "what-if" in w]
    assert doc["ranks"][0]["syncs"][0]["count"] == 1


OUTER = ["cudaLaunchKernel", "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaFree",
         "cudaStreamWaitEvent", "cudaMemcpy"]
INNER = ["cudaGetDevice", "cuCtxSynchronize", "cuStreamSynchronize", "cuStreamWaitEvent",
         "cuLaunchKernel"]
STRENGTH = {"device": 3, "event": 2, "stream_wait": 1}
KIND = {"cudaDeviceSynchronize": "device", "cuCtxSynchronize": "device",
        "cudaStreamSynchronize": "event", "cuStreamSynchronize": "event", "cudaMemcpy": "event",
        "cudaStreamWaitEvent": "stream_wait", "cuStreamWaitEvent": "stream_wait"}
call = st.tuples(st.sampled_from(OUTER), st.integers(4, 12),
                 st.lists(st.sampled_from(INNER), max_size=2), st.integers(1, 5),
                 st.booleans())


@settings(max_examples=40, deadline=None)
@given(calls=st.lists(call, min_size=1, max_size=12), fmt=st.sampled_from(["kineto", "nsys"]))
def test_random_call_trees_count_each_top_level_call_once(calls: list[Any], fmt: str) -> None:
    # given host calls, each with up to two calls nested in it, some launching a kernel
    k = KinetoTrace(rank=0)
    ex = NsysExport()
    t: Any = k if fmt == "kineto" else ex.process(4242)
    want: dict[tuple[str, str], list[int]] = {}
    at = 0
    for outer, dur, inner, gap, launches in calls:
        corr = t.runtime(outer, at, dur)
        for j, name in enumerate(inner):
            t.runtime(name, at + 1 + j, 1, cat=DRIVER)  # strictly inside the outer call
        if launches:
            t.gpu(at + 1, 2, corr=corr)
        kinds = [KIND[n] for n in (outer, *inner) if n in KIND]
        if kinds:  # the strongest kind in the tree is the top-level call's
            w = want.setdefault((outer, max(kinds, key=STRENGTH.__getitem__)), [0, 0])
            w[0] += 1
            w[1] += dur
        at += dur + gap
    t.gpu(at, 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = (k.write(Path(tmp) / "t.json") if fmt == "kineto"
                else ex.write(Path(tmp) / "t.sqlite"))
        # when the default report runs
        rep = default_report(load_timelines([path]))
    # then each top-level call is one sync of its kind, blocked for its own duration
    got = {(s.api, s.kind): [s.count, s.host_blocked_us] for s in rep.ranks[0].syncs}
    assert got == {key: [n, float(us)] for key, (n, us) in want.items()}


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_a_kernel_is_launched_when_its_top_level_call_began(tmp_path: Path, fmt: str) -> None:
    # given a kernel whose launching call (the correlation id) is nested in a call that
    # began in the step before: step 0 [0, 10), step 1 [10, 20)
    ex = NsysExport()
    k = KinetoTrace(rank=0)
    t: Any = k if fmt == "kineto" else ex.process(4242)
    t.annotation("profplug.step", 0, 10)
    t.annotation("profplug.step", 10, 10)
    t.launch(1, 2, 2)  # step 0: GPU 2-4
    t.runtime("cudaLaunchKernel", 9, 2)  # 9-11, begun in step 0
    t.gpu(12, 2, corr=t.runtime("cuLaunchKernel", 10.5, 0.3, cat=DRIVER))  # GPU 12-14
    t.launch(15, 16, 2)  # step 1: GPU 16-18
    path = k.write(tmp_path / "t.json") if fmt == "kineto" else ex.write(tmp_path / "t.sqlite")
    r = report(path).rank(0)
    # then it belongs to step 0: the steps' GPU periods are 2 -> 16 (14 us), not 2 -> 12
    assert r.steps is not None and r.steps.n_steps == 2
    assert r.steps.period_us == 14.0
