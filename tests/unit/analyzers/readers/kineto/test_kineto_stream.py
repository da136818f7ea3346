"""The Kineto reader's streaming: any block size, any cut, gives the whole-file timeline."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers import blocks
from profplug.analyzers.readers.kineto import reader, stream
from profplug.analyzers.readers.kineto.decode import Event
from profplug.analyzers.readers.kineto.stream import EventStream
from profplug.analyzers.steps.rule import DEFAULT_STEPS
from synth import KinetoTrace, mixed_trace


def _whole(path: Path) -> Timeline:
    """The oracle: the stdlib parses the whole file, msgspec types each event."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = [msgspec.convert(e, Event) for e in doc["traceEvents"]]
    header, _ = reader.header_from(doc)
    rows = reader._Rows()
    rows.feed(events)
    return rows.finish(path, header, 0, DEFAULT_STEPS)


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
def test_tiny_blocks_give_the_whole_file_timeline(tmp_path: Path, name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # given a trace read in many blocks (512 bytes, gzip inflated 64 compressed bytes at a time)
    path = _many_steps().write(tmp_path / name)
    monkeypatch.setattr(blocks, "BLOCK", 512)
    monkeypatch.setattr(blocks, "GZ_BLOCK", 64)
    assert sum(1 for _ in EventStream(path, 1 << 30)) > 10
    # when it is streamed, then every column equals the whole-file read
    streamed = reader.read_kineto(path)
    _assert_same(streamed, _whole(path))
    assert streamed.n_gpu == 43 and streamed.step_num.size == 39


@pytest.mark.parametrize("lead", [b"", b" \n\t", b"\xef\xbb\xbf\n"])
@pytest.mark.parametrize("block", [blocks.BLOCK, 100])
def test_trace_events_is_found_wherever_it_falls_among_the_heads_pieces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lead: bytes, block: int) -> None:
    # given headers whose length puts '"traceEvents": [' at every offset across a boundary
    # of the pieces a block is taken in (64 bytes here), after whitespace or a byte order mark
    monkeypatch.setattr(stream, "HEAD_STEP", 64)
    monkeypatch.setattr(blocks, "BLOCK", block)
    body = _many_steps().write(tmp_path / "base.json").read_bytes().lstrip()
    assert body[:1] == b"{"
    for pad in range(30, 100):
        path = tmp_path / f"t{pad}.json"
        path.write_bytes(lead + b'{"pad": "' + b"x" * pad + b'", ' + body[1:])
        # when it is streamed, then it reads as the whole file does
        _assert_same(reader.read_kineto(path), _whole(path))


def test_fields_after_the_event_array_are_read(tmp_path: Path) -> None:
    # given baseTimeNanoseconds written after traceEvents (key order reversed)
    d = _many_steps().to_dict()
    tail_first = {"traceEvents": d.pop("traceEvents"), **d}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(tail_first))
    streamed = reader.read_kineto(path)
    assert streamed.metadata["baseTimeNanoseconds"] == d["baseTimeNanoseconds"]
    _assert_same(streamed, _whole(path))


def test_objects_in_a_key_after_the_event_array_end_the_read(tmp_path: Path) -> None:
    # given a key after traceEvents whose value holds an array of objects (a '}, {' the fast
    # path would take for a cut between events), in a file shorter than the look-ahead
    d = _many_steps().to_dict()
    doc = {"traceEvents": d.pop("traceEvents"), **d, "otherData": {"a": [{"b": 1}, {"c": 2}]}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc, indent=1))
    # when it is streamed (it used to loop for ever), then every event is read
    _assert_same(reader.read_kineto(path), _whole(path))


def test_a_cut_inside_an_event_is_found_exactly(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # given events whose args nest a list of objects ("}, {" between them, not between events)
    t = _many_steps()
    for ev in t.events:
        ev.setdefault("args", {})["blocks"] = [{"x": i} for i in range(40)]
    path = t.write(tmp_path / "t.json")
    monkeypatch.setattr(blocks, "BLOCK", 256)
    # when streamed in blocks that end inside events, then nothing is lost or invented
    tl = reader.read_kineto(path)
    _assert_same(tl, _whole(path))
    assert tl.warnings == []


def test_packed_columns_equal_unpacked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given rows packed into numpy every 7 rows
    path = _many_steps().write(tmp_path / "t.json")
    whole = reader.read_kineto(path)
    monkeypatch.setattr(reader, "FLUSH_ROWS", 7)
    _assert_same(reader.read_kineto(path), whole)
