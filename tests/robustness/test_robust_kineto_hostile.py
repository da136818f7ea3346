"""Kineto reader vs hostile bytes: one bad token costs one
event, work is linear in the file (counted, not timed), memory is bounded (checked under an
address-space limit), huge numbers and deep nesting are skipped or ignored with a reason.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hostile_inputs import DEEP, gz_repeat
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers import blocks
from profplug.analyzers.readers.kineto import chunks, reader
from profplug.analyzers.readers.kineto.scan import Scan
from profplug.analyzers.report.analysis import analyze_timelines
from synth import KinetoTrace

N = 300  # launch + kernel pairs: 600 events


def trace() -> KinetoTrace:
    t = KinetoTrace(rank=0)
    for k in range(N):
        t.launch(10 * k, 10 * k + 2, 5, name=f"kernel_{k} {{lambda()#1}}, {{x}}")
    return t


def text() -> bytes:
    return json.dumps(trace().to_dict(), indent=1).encode()


def kernel_at(data: bytes, k: int) -> int:
    """Offset of kernel k's name."""
    return data.index(f'"kernel_{k} '.encode())


# Each mutation breaks the kernel whose name is at offset i; (mutate, events lost, reason).
BREAKS = {
    "NaN": (lambda s, i: s[:i] + s[i:].replace(b'"dur": 5', b'"dur": NaN', 1), 1,
            "invalid JSON"),
    "syntax error": (lambda s, i: s[:i] + b"x" + s[i:], 1, "invalid JSON"),
    "lone surrogate": (lambda s, i: s[:i + 1] + b"\\ud800" + s[i + 1:], 1,
                       "bad UTF-8 in name"),
    "bad UTF-8": (lambda s, i: s[:i + 1] + b"\xff" + s[i + 1:], 1, "bad UTF-8 in name"),
    "lost closing brace": (lambda s, i: s[:s.index(b"}\n  }", i) + 4]
                           + s[s.index(b"}\n  }", i) + 5:], 1, "invalid JSON"),
    "stray ]": (lambda s, i: s[:i] + s[i:].replace(b'"stream": 7', b'"stream": 7]', 1), 1,
                "invalid JSON"),
    "deep nesting": (lambda s, i: s[:i] + s[i:].replace(b'"device": 0',
                                                        b'"d": ' + DEEP + b', "device": 0', 1),
                     1, "nested too deep"),
    "extra }": (lambda s, i: s[:s.index(b"}\n  }", i) + 5] + b"}"
                + s[s.index(b"}\n  }", i) + 5:], 0, "invalid JSON"),
}


@pytest.mark.parametrize("where", [0, N // 2, N - 1])
@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_one_bad_token_costs_one_event(tmp_path: Path, kind: str, where: int,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # given a trace with one bad token in kernel `where`, read in 4 KiB blocks
    mutate, lost, reason = BREAKS[kind]
    data = text()
    p = tmp_path / "rank0.json"
    p.write_bytes(mutate(data, kernel_at(data, where)))
    monkeypatch.setattr(blocks, "BLOCK", 4096)
    # when read
    tl = reader.read_kineto(p)
    # then only that event is skipped, with its reason, and nothing else is lost
    assert tl.skipped == {reason: 1}
    assert tl.api_start_ns.size == N and tl.n_gpu == N - lost
    assert tl.warnings == [] and tl.metadata["baseTimeNanoseconds"] > 0
    names = {tl.names[i] for i in tl.gpu_name}
    assert {f"kernel_{k} {{lambda()#1}}, {{x}}" for k in range(N) if k != where} <= names


def work(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Bytes handed to the decoders and bytes scanned, while reading ``path``."""
    count = {"decoded": 0, "scanned": 0}
    de, di, run = chunks.decode_events, chunks.decode_item, Scan.run

    def decode_events(piece, *exact):
        count["decoded"] += len(piece)
        return de(piece, *exact)

    def decode_item(item, *exact):
        count["decoded"] += len(item)
        return di(item, *exact)

    def scan_run(self, buf, pos, end):
        reached, closed = run(self, buf, pos, end)
        count["scanned"] += max(reached - pos, 0)
        return reached, closed

    monkeypatch.setattr(chunks, "decode_events", decode_events)
    monkeypatch.setattr(chunks, "decode_item", decode_item)
    monkeypatch.setattr(Scan, "run", scan_run)
    reader.read_kineto(path)
    return dict(count)


@pytest.mark.parametrize("kind", ["NaN", "lost closing brace", "stray ]", "extra }"])
def test_work_is_linear_whatever_the_bad_token(tmp_path: Path, kind: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # given a bad token in the middle (the old reader re-decoded the array once per ']')
    data = text()
    p = tmp_path / "rank0.json"
    p.write_bytes(BREAKS[kind][0](data, kernel_at(data, N // 2)))
    monkeypatch.setattr(blocks, "BLOCK", 4096)
    # when read, then each byte is decoded about once, and only the block around the bad
    # token is scanned exactly: the fast path takes over again right after it
    w = work(p, monkeypatch)
    assert w["decoded"] <= 2.5 * len(data), w
    assert w["scanned"] <= 4 * 4096, w


def test_an_event_bigger_than_the_limit_is_skipped_in_linear_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given one 3 MB event (limit lowered to 1 MiB) between normal ones, read in 64 KiB blocks
    t = trace()
    t.events.insert(10, {"ph": "X", "cat": "cpu_op", "name": "big", "pid": 1, "tid": 1,
                         "ts": 1.0, "dur": 1.0, "args": {"blob": "x" * (3 << 20)}})
    p = t.write(tmp_path / "rank0.json")
    monkeypatch.setattr(chunks, "MAX_EVENT", 1 << 20)
    monkeypatch.setattr(chunks, "SLOW_AFTER", 1 << 18)
    monkeypatch.setattr(blocks, "BLOCK", 1 << 16)
    w = work(p, monkeypatch)
    # then it is skipped and counted, the others kept, and no byte is scanned twice
    tl = reader.read_kineto(p)
    assert tl.skipped == {"event larger than 64 MiB": 1} and tl.n_gpu == N
    assert w["scanned"] <= 1.2 * p.stat().st_size and w["decoded"] <= 0.5 * p.stat().st_size


def run_limited(args: list[str], mem_mb: int, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``profplug`` under an address-space limit."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "profplug", *args], capture_output=True,
                          text=True, timeout=120, preexec_fn=limit, env=env)


@pytest.mark.parametrize("where", ["between events", "after the array"])
def test_whitespace_is_not_held(tmp_path: Path, where: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    # given 64 MB of spaces between two events, or after the event array, gzipped (~64 KB)
    data = text()
    mid = data.index(b",\n  {", len(data) // 2) + 1 if where == "between events" \
        else data.index(b"],") + 2
    p = tmp_path / "rank0.json.gz"
    p.write_bytes(gz_repeat(data[:mid], b" " * (1 << 20), 64, data[mid:]))
    held = [0]
    feed = chunks.EventArray.feed

    def tracked(self, data, final=False):
        out = feed(self, data, final)
        held[0] = max(held[0], len(self.buf))
        return out

    monkeypatch.setattr(chunks.EventArray, "feed", tracked)
    # when read, then every event is kept and at most a few blocks were ever held
    tl = reader.read_kineto(p)
    assert tl.skipped == {} and tl.n_gpu == N and tl.api_start_ns.size == N
    assert held[0] <= chunks.SLOW_AFTER + 2 * blocks.BLOCK
    assert tl.warnings == [] and tl.metadata["baseTimeNanoseconds"] > 0


def test_gzip_bomb_stops_at_the_budget_in_bounded_memory(tmp_path: Path) -> None:
    # given repeated kernel events inflating to 136 MB (a 140 KB .gz)
    k = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1},\n'
    p = tmp_path / "rank0.json.gz"
    p.write_bytes(gz_repeat(b'{"traceEvents": [\n', k * 8192, 200, b"{}]}"))
    # when read under a 1.2 GB address-space limit with a 32 MiB budget
    res = run_limited(["report", str(p), "--jobs", "1", "--max-decompressed", "32M"], 1200,
                      tmp_path)
    # then one line says so, naming the file and the way out
    assert res.returncode == 3 and "Traceback" not in res.stderr
    assert res.stderr.strip() == (f"profplug: error: {p}: inflates to more than 32 MiB (a "
                                  "decompression bomb?); if the trace is real, raise the limit "
                                  "with --max-decompressed (or $PROFPLUG_MAX_DECOMPRESSED)")


def test_deep_header_keeps_the_fields_it_can(tmp_path: Path) -> None:
    d = trace().to_dict()
    s = json.dumps(d).encode().replace(b'"schemaVersion": 1,', b'"deep": ' + DEEP + b",")
    p = tmp_path / "t.json"
    p.write_bytes(s)
    tl = reader.read_kineto(p)
    assert (tl.rank, tl.rank_rule) == (0, "distributedInfo.rank")
    assert tl.metadata["baseTimeNanoseconds"] == d["baseTimeNanoseconds"]


@pytest.mark.parametrize(("base", "why"), [(2**64, "out of range"), (2**63 - 1000, "out of range"),
                                           (-5, "out of range"), ('"soon"', "out of range")])
def test_absurd_base_is_ignored_with_a_warning(tmp_path: Path, base: object, why: str) -> None:
    s = json.dumps(trace().to_dict()).encode()
    s = s.replace(str(trace().to_dict()["baseTimeNanoseconds"]).encode(), str(base).encode())
    p = tmp_path / "t.json"
    p.write_bytes(s)
    tl = reader.read_kineto(p)
    assert why in tl.warnings[0] and "no baseTimeNanoseconds" in tl.warnings[1]
    assert int(tl.gpu_start_ns.min()) == 2000  # relative to the rank's own base
    assert abs(tl.gpu_end_ns).max() < 2**62


def test_huge_numbers_are_skipped_or_defaulted(tmp_path: Path) -> None:
    t = trace()
    t.annotation("ProfilerStep#" + "9" * 30, 0, 10)
    t.annotation("ProfilerStep#" + "9" * 5000, 0, 10)
    t.events[0]["tid"] = "9" * 5000
    t.events[1]["pid"] = "7" * 40
    tl = reader.read_kineto(t.write(tmp_path / "t.json"))
    assert tl.skipped == {"step number out of range": 2}
    assert tl.api_tid[0] == -1 and tl.n_gpu == N


def test_mixed_timestamp_styles_are_skipped_not_a_1e15_us_window(tmp_path: Path) -> None:
    t = trace()
    t.events[5]["ts"] = 1_764_000_000_000_000.0  # epoch us in a relative trace
    tl = reader.read_kineto(t.write(tmp_path / "t.json"))
    assert tl.skipped == {"timestamp style unlike the trace's (epoch vs relative us)": 1}
    assert int(tl.gpu_end_ns.max() - tl.gpu_start_ns.min()) < 10_000_000


def test_figures_that_do_not_add_up_are_never_reported() -> None:
    # given a hand-made timeline whose times wrapped around int64 (the old reader did this
    # with baseTimeNanoseconds near 2^63): the window comes out negative
    i64 = np.int64
    tl = Timeline(rank=3, source="kineto", files=["wrapped.json"], names=["k"],
                  gpu_start_ns=np.array([2**63 - 3000, -(2**63) + 500], dtype=i64),
                  gpu_end_ns=np.array([2**63 - 1000, -(2**63) + 900], dtype=i64),
                  gpu_device=np.zeros(2, i64), gpu_stream=np.zeros(2, i64),
                  gpu_kind=np.zeros(2, np.int8), gpu_name=np.zeros(2, np.int32),
                  gpu_corr=np.full(2, -1, i64))
    with pytest.raises(TraceError, match=r"wrapped\.json: rank 3: the analysis does not add up"):
        analyze_timelines([tl])


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "rank0.json")
    with pytest.raises(TraceError, match="not a regular file \\(a FIFO\\)"):
        reader.read_kineto(tmp_path / "rank0.json")
