"""The Kineto reader's chunked streaming path gives exactly the whole-file timeline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.readers import jsonchunks, kineto
from profplug.analyzers.timeline import Timeline
from synth import KinetoTrace, mixed_trace


def _whole(path: Path) -> Timeline:
    data, _ = kineto.read_bytes(path)
    header, events, _, _ = kineto._decode(path, data)
    return kineto._to_timeline(path, header, events, file_index=0)


def _assert_same(a: Timeline, b: Timeline) -> None:
    for name in Timeline._ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.names, a.rank, a.metadata, a.skipped) == (b.names, b.rank, b.metadata, b.skipped)


def _many_steps() -> KinetoTrace:
    t = mixed_trace()
    for k in range(1, 40):
        t.annotation(f"ProfilerStep#{k}", 100 * k, 90)
        t.launch(100 * k + 1, 100 * k + 3, 20, name="gemm {lambda()#1}, {x}")
        t.runtime("cudaDeviceSynchronize", 100 * k + 5, 30)
        t.cuda_sync("Context Sync", 100 * k + 30, 1, stream=-1)
    return t


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_tiny_chunks_give_the_whole_file_timeline(tmp_path: Path, name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # given a trace cut into many chunks (blocks of 512 bytes, gzip inflated 64 at a time)
    path = _many_steps().write(tmp_path / name)
    monkeypatch.setattr(jsonchunks, "BLOCK", 512)
    monkeypatch.setattr(jsonchunks, "GZ_BLOCK", 64)
    n_chunks = sum(1 for c in jsonchunks.event_chunks(path) if not isinstance(c, tuple))
    assert n_chunks > 10
    # when it is streamed, then every column equals the whole-file read
    streamed = kineto._read_streaming(path, 0)
    assert streamed is not None
    _assert_same(streamed, _whole(path))
    assert streamed.n_gpu == 43 and streamed.step_num.size == 39


def test_fields_after_the_event_array_are_read(tmp_path: Path) -> None:
    # given baseTimeNanoseconds written after traceEvents (key order reversed)
    d = _many_steps().to_dict()
    tail_first = {"traceEvents": d.pop("traceEvents"), **d}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(tail_first))
    streamed = kineto._read_streaming(path, 0)
    assert streamed is not None
    assert streamed.metadata["baseTimeNanoseconds"] == d["baseTimeNanoseconds"]
    _assert_same(streamed, _whole(path))


def test_a_cut_inside_an_event_falls_back_to_the_whole_file(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # given events whose args nest a list of objects ("}, {" between them, not between events)
    t = _many_steps()
    for ev in t.events:
        ev.setdefault("args", {})["blocks"] = [{"x": i} for i in range(40)]
    path = t.write(tmp_path / "t.json")
    monkeypatch.setattr(jsonchunks, "BLOCK", 256)
    # when streamed, a chunk is cut inside an event and fails to decode
    assert kineto._read_streaming(path, 0) is None
    # then read_kineto reads the whole file instead: same timeline
    _assert_same(kineto.read_kineto(path), _whole(path))
