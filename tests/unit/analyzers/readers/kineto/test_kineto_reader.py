"""The Kineto reader: timestamp styles, ranks, gzip, and bad input."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers import analyze, load_timelines
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.kineto import chunks
from profplug.analyzers.readers.kineto.reader import read_kineto
from synth import BASE_NS, KinetoTrace, mixed_trace


def test_relative_and_epoch_timestamps_give_the_same_timeline(tmp_path: Path) -> None:
    rel = mixed_trace()
    epoch = mixed_trace(epoch_us=True)
    a = read_kineto(rel.write(tmp_path / "a.json"))
    b = read_kineto(epoch.write(tmp_path / "b.json"))
    assert a.gpu_start_ns[0] == BASE_NS  # relative ts + baseTimeNanoseconds
    np.testing.assert_array_equal(a.gpu_start_ns, b.gpu_start_ns)
    np.testing.assert_array_equal(a.api_end_ns, b.api_end_ns)


def test_nanosecond_decimals_are_kept(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.gpu(1.234, 0.567)
    tl = read_kineto(t.write(tmp_path / "t.json"))
    assert int(tl.gpu_start_ns[0] - BASE_NS) == 1234
    assert int(tl.gpu_end_ns[0] - tl.gpu_start_ns[0]) == 567


def test_gzip_reads_like_plain(tmp_path: Path) -> None:
    a = read_kineto(mixed_trace().write(tmp_path / "a.json"))
    b = read_kineto(mixed_trace().write(tmp_path / "b.json.gz"))
    np.testing.assert_array_equal(a.gpu_end_ns, b.gpu_end_ns)
    assert a.names == b.names


def test_rank_from_distributed_info_then_file_name_then_order(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    KinetoTrace(rank=5).write(d / "x.json")
    t = KinetoTrace(rank=None)
    t.gpu(0, 1)
    t.write(d / "worker_rank7.json.gz")
    tls = load_timelines([d], jobs=1)
    assert [(x.rank, x.rank_rule) for x in tls] == [(5, "distributedInfo.rank"),
                                                    (7, "rank in file name")]
    u = tmp_path / "u.json"
    KinetoTrace(rank=None).write(u)
    (tl,) = load_timelines([u], jobs=1)
    assert tl.rank == 0 and tl.rank_rule.startswith("file order")


def test_two_files_claiming_one_rank_is_an_error_naming_both(tmp_path: Path) -> None:
    a = KinetoTrace(rank=1).write(tmp_path / "a.json")
    b = KinetoTrace(rank=1).write(tmp_path / "b.json")
    with pytest.raises(TraceError, match=r"rank 1 appears twice: .*a\.json \(.*\) and .*b\.json \(.*\)"):
        load_timelines([a, b], jobs=1)


def test_directory_is_read_in_parallel_with_the_same_result(tmp_path: Path) -> None:
    for r in range(3):
        t = mixed_trace()
        t.rank = r
        t.write(tmp_path / f"rank{r}.json")
    serial = analyze([tmp_path], jobs=1).to_dict()
    parallel = analyze([tmp_path], jobs=2).to_dict()
    assert serial == parallel
    assert [r["rank"] for r in parallel["ranks"]] == [0, 1, 2]


def test_cuda_sync_events_are_read(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.gpu(0, 1)
    t.cuda_sync("Context Sync", 2, 3, stream=-1, corr=9)
    t.cuda_sync("Stream Wait Event", 4, 0, stream=7, corr=10, wait_on_stream=13, wait_corr=8)
    tl = read_kineto(t.write(tmp_path / "t.json"))
    assert tl.has_gpu_sync_records
    assert tl.gsync_kind.tolist() == [4, 2]
    assert tl.gsync_wait_corr.tolist() == [-1, 8]


def test_timeline_save_load_roundtrip(tmp_path: Path) -> None:
    tl = read_kineto(mixed_trace().write(tmp_path / "t.json"))
    tl.save(tmp_path / "t.npz")
    back = Timeline.load(tmp_path / "t.npz")
    assert back.names == tl.names and back.rank == tl.rank
    for k in Timeline._ARRAYS:
        np.testing.assert_array_equal(getattr(back, k), getattr(tl, k))


def test_exact_path_agrees_with_fast_path(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    p = _many_events().write(tmp_path / "t.json")
    fast = read_kineto(p)
    monkeypatch.setattr(chunks, "BOUNDARY", re.compile(rb"(?!)"))  # no cut: exact only
    exact = read_kineto(p)
    for k in Timeline._ARRAYS:
        np.testing.assert_array_equal(getattr(exact, k), getattr(fast, k), err_msg=k)
    assert (exact.names, exact.warnings, exact.skipped) == (fast.names, [], {})
    assert fast.n_gpu == 4 + 30


def _many_events() -> KinetoTrace:
    t = mixed_trace()
    for k in range(30):
        t.launch(40 + 10 * k, 41 + 10 * k, 5, name=f"k{k} {{lambda()#1}}, {{x}}")
    return t


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("content", "message"), [
    (b"", "empty file"),
    (b"\x1f\x8b\x08\x00garbage-garbage", "corrupt or truncated gzip"),
    (b"hello world", "not a Kineto trace"),
    (b'{"nodes": [], "schema": "1.0.1"}', "not a Kineto trace"),
    (b"[1, 2, 3]", "not a Kineto trace"),
    (b'{"traceEvents": [', "truncated before the first complete event"),
])
def test_bad_files_raise_one_line_errors_naming_the_file(tmp_path: Path, content: bytes,
                                                         message: str) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(TraceError) as ei:
        read_kineto(p)
    assert message in str(ei.value) and str(p) in str(ei.value)
    assert "\n" not in str(ei.value)


def test_truncated_trace_recovers_complete_events(tmp_path: Path) -> None:
    full = json.dumps(mixed_trace().to_dict(), indent=1).encode()
    cut = full[: int(len(full) * 0.6)]
    p = tmp_path / "cut.json"
    p.write_bytes(cut)
    tl = read_kineto(p)
    n_total = len(mixed_trace().events)
    assert tl.warnings and tl.warnings[0].startswith(f"truncated at byte {len(cut)}")
    recovered = int(tl.warnings[0].split("; ")[1].split()[0])
    assert 0 < recovered < n_total
    assert tl.n_gpu + tl.api_start_ns.size + tl.ann_start_ns.size == recovered


def test_truncated_gzip_recovers_too(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    for k in range(2000):
        t.launch(10.0 * k, 10.0 * k + 1, 5)
    gz = gzip.compress(json.dumps(t.to_dict()).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(gz[: len(gz) // 2])
    tl = read_kineto(p)
    assert any("gzip stream cut short" in w for w in tl.warnings)
    assert any("truncated" in w for w in tl.warnings)
    assert 0 < tl.n_gpu < 2000


def test_bad_events_are_skipped_and_counted(tmp_path: Path) -> None:
    t = mixed_trace()
    t.events += [
        {"ph": "X", "cat": "kernel", "name": "neg", "pid": 0, "tid": 7, "ts": 1.0, "dur": -5},
        {"ph": "X", "cat": "kernel", "name": "days", "pid": 0, "tid": 7, "ts": 1.0,
         "dur": 3.0e11},
        {"ph": "X", "cat": "kernel", "name": "no_ts", "pid": 0, "tid": 7},
        {"ph": "X", "cat": "kernel", "name": "huge", "pid": 0, "tid": 7, "ts": 50.0, "dur": 1.0,
         "args": {"correlation": 2**80}},
        {"ph": "X", "cat": "weird_new_category", "name": "x", "pid": 0, "tid": 7, "ts": 1.0,
         "dur": 1.0},
        "not an event",
    ]
    tl = read_kineto(t.write(tmp_path / "t.json"))
    # a kernel whose correlation is no int64 is skipped and counted: kept without it, its
    # launch would lose its GPU op
    assert tl.skipped == {"negative or absurd duration": 2, "missing ts/dur": 1,
                          "undecodable event": 1, "args.correlation not an int64": 1}
    assert "huge" not in [tl.names[i] for i in tl.gpu_name]


def test_run_directory_skips_run_json_status_files_and_ab_json(tmp_path: Path) -> None:
    (tmp_path / "kineto").mkdir()
    (tmp_path / "status").mkdir()
    mixed_trace().write(tmp_path / "kineto" / "rank0.json.gz")
    (tmp_path / "run.json").write_text('{"command": ["x"]}')
    (tmp_path / "status" / "rank0.json").write_text('{"rank": 0, "state": "finished"}')
    (tmp_path / "ab.json").write_text('{"version": 1, "runs": []}')  # profplug ab's result
    (tl,) = load_timelines([tmp_path], jobs=1)
    assert tl.files == [str(tmp_path / "kineto" / "rank0.json.gz")]


def test_epoch_us_with_ns_decimals_are_exact(tmp_path: Path) -> None:
    # given older torch's epoch microseconds with nanosecond decimals (float64 is 0.25 us
    # apart there): two kernels exactly 1000.250 us apart, each 0.375 us long
    base = 1_764_000_000_000_000
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 0.375,
           "args": {"device": 0, "stream": 7}} for _ in range(2)]
    text = json.dumps({"traceEvents": ev}).replace('"dur"', '"ts": TS, "dur"')
    text = text.replace("TS", f"{base}.125", 1).replace("TS", f"{base + 1000}.375", 1)
    p = tmp_path / "rank0.json"
    p.write_text(text)
    tl = read_kineto(p)
    # then every nanosecond is kept
    assert tl.gpu_start_ns.tolist() == [base * 1000 + 125, (base + 1000) * 1000 + 375]
    assert int(tl.gpu_start_ns[1] - tl.gpu_start_ns[0]) == 1_000_250
    assert (tl.gpu_end_ns - tl.gpu_start_ns).tolist() == [375, 375]


def test_epoch_us_with_an_exponent_are_exact(tmp_path: Path) -> None:
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 1.0,
           "args": {"device": 0, "stream": 7}} for _ in range(2)]
    text = json.dumps({"traceEvents": ev}).replace('"ts": 0', '"ts": 1.764000000000000125e15',
                                                   1).replace('"ts": 0',
                                                              '"ts": 1.764000000001000375e15')
    p = tmp_path / "rank0.json"
    p.write_text(text)
    tl = read_kineto(p)
    assert int(tl.gpu_start_ns[1] - tl.gpu_start_ns[0]) == 1_000_250


def test_a_kineto_begin_end_sync_is_counted(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 2, 50)
    t.events += [{"ph": ph, "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
                  "tid": 1, "ts": ts} for ph, ts in (("B", 3.0), ("E", 60.0))]
    tl = read_kineto(t.write(tmp_path / "rank0.json"))
    assert tl.skipped == {"begin/end pair (ph B/E), not read": 1}
