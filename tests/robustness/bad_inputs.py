"""Bad inputs for ``profplug report``, each built in a directory (used by the tests and by
scripts/robustness_table.py, which writes the table in docs/robustness.md)."""

from __future__ import annotations

import gzip
import json
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import hostile_inputs
from synth import KinetoTrace, mixed_trace

ROOT = Path(__file__).resolve().parents[2]
NSYS_SEED = ROOT / "sample_traces" / "pp2_infer_nsys" / "device" / "report.sqlite.gz"


@dataclass
class Case:
    name: str
    build: Callable[[Path], list[Path]]  # writes the input, returns the report arguments
    code: int  # expected exit status
    says: str  # expected in stderr (errors) or stdout (reports)
    args: tuple[str, ...] = ()


def _seed() -> bytes:
    return json.dumps(mixed_trace().to_dict(), indent=1).encode()


def _w(p: Path, data: bytes) -> list[Path]:
    p.write_bytes(data)
    return [p]


def _et(d: Path) -> list[Path]:
    et = {"schema": "1.1.1-chakra.0.0.4", "pid": 7, "time": "2025-01-01", "start_ts": 1,
          "nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]",
                     "ctrl_deps": 0, "inputs": {}, "outputs": {}, "attrs": []}]}
    return _w(d / "et.json", json.dumps(et).encode())


def _other_sqlite(d: Path) -> list[Path]:
    p = d / "app.sqlite"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.execute("INSERT INTO users VALUES (1, 'x')")
    conn.commit()
    conn.close()
    return [p]


def _mixed_dir(d: Path) -> list[Path]:
    m = d / "mixed"
    m.mkdir()
    mixed_trace().write(m / "rank0.json")
    (m / "notes.txt").write_text("hello")
    _et(m)
    return [m]


def _empty_dir(d: Path) -> list[Path]:
    (d / "nothing").mkdir()
    (d / "nothing" / "notes.txt").write_text("hello")
    return [d / "nothing"]


def _dup(d: Path) -> list[Path]:
    return [mixed_trace().write(d / "a.json"), mixed_trace().write(d / "b.json")]


def _cut_sqlite(d: Path) -> list[Path]:
    data = gzip.decompress(NSYS_SEED.read_bytes())
    return _w(d / "cut.sqlite", data[: len(data) // 3])


def _bad_events(d: Path) -> list[Path]:
    s = _seed().replace(b'"gemm_kernel"', b'"gemm_\xff\xfekernel"', 1)
    s = s.replace(b'"ts": 16,', b'"ts": ' + b"9" * 40 + b",", 1)
    s = s.replace(b'"dur": 5,', b'"dur": 1e400,', 1)
    return _w(d / "rank0.json", s)


def _half_gz() -> bytes:
    gz = gzip.compress(_seed())
    return gz[: len(gz) // 2]


def _no_rank_json_gz(d: Path) -> list[Path]:
    t = KinetoTrace(rank=None)
    t.launch(0, 0, 10)
    return [t.write(d / "trace.json.gz")]


CASES: list[Case] = [
    Case("empty file", lambda d: _w(d / "e.json", b""), 3, "empty file"),
    Case("random bytes (.json)", lambda d: _w(d / "r.json", random.Random(8).randbytes(4096)),
         3, "not a Kineto trace"),
    Case("unknown extension", lambda d: _w(d / "t.txt", b"x"), 3, "unknown trace format"),
    Case("corrupt gzip", lambda d: _w(d / "c.json.gz", b"\x1f\x8b\x08\x00garbage-garbage"), 3,
         "corrupt or truncated gzip"),
    Case("JSON array, not an object", lambda d: _w(d / "a.json", b"[1, 2]"), 3,
         "not a Kineto trace"),
    Case("PyTorch execution trace", _et, 3, "execution trace"),
    Case("directory of mixed files", _mixed_dir, 3, "execution trace"),
    Case("directory without traces", _empty_dir, 3, "no trace files"),
    Case("no such path", lambda d: [d / "missing.json"], 3, "no such file"),
    Case("SQLite file, not an Nsight export", _other_sqlite, 3,
         "not an Nsight Systems export"),
    Case("text file named .sqlite", lambda d: _w(d / "t.sqlite", b"hello"), 3,
         "not a SQLite file"),
    Case("corrupt .sqlite.gz", lambda d: _w(d / "c.sqlite.gz", b"\x1f\x8bxx"), 3,
         "corrupt or truncated gzip"),
    Case("Nsight export cut to 1/3", _cut_sqlite, 3, "unreadable"),
    Case("two files claiming rank 0", _dup, 3, "rank 0 appears twice"),
    Case("truncated Kineto JSON", lambda d: _w(d / "rank0.json", _seed()[:1500]), 0,
         "truncated at byte 1500"),
    Case("truncated Kineto JSON, --strict", lambda d: _w(d / "rank0.json", _seed()[:1500]),
         1, "--strict", ("--strict",)),
    Case("truncated .json.gz", lambda d: _w(d / "rank0.json.gz", _half_gz()),
         0, "gzip stream cut short"),
    Case("bad UTF-8 name, 40-digit ts, dur 1e400", _bad_events, 0,
         "skipped events: timestamp out of range: 1, negative or absurd duration: 1, "
         "bad UTF-8 in name: 1"),
    Case("no rank anywhere (.json.gz)", _no_rank_json_gz, 0, "rank from file order"),
]

# hostile_inputs: hostile tokens, bombs, huge numbers, odd exports. "says" is the line
# the table shows: a skip count, a warning, or the report line that proves the outcome.
K16 = b'"ts": 16,'
CASES += [
    Case("NaN in one event, mid-file", hostile_inputs.kineto(lambda s: s.replace(K16, b'"ts": NaN,')), 0,
         "skipped events: invalid JSON: 1"),
    Case("syntax error in one event", hostile_inputs.kineto(lambda s: s.replace(K16, b'"ts": 16 x,')), 0,
         "skipped events: invalid JSON: 1"),
    Case("an event that lost its closing brace", hostile_inputs.kineto(hostile_inputs.no_closing_brace), 0,
         "skipped events: invalid JSON: 1"),
    Case("lone \\ud800 escape in the first kernel name",
         hostile_inputs.kineto(lambda s: s.replace(b'"gemm_kernel"', b'"gemm\\ud800"', 1)), 0,
         "skipped events: bad UTF-8 in name: 1"),
    Case("100k-deep nesting in an event's args",
         hostile_inputs.kineto(lambda s: s.replace(b'"device": 0,', b'"deep": ' + hostile_inputs.DEEP + b', "device": 0,',
                                      1)), 0, "skipped events: nested too deep: 1"),
    Case("100k-deep nesting as an event", hostile_inputs.kineto(
        lambda s: s.replace(b'"traceEvents": [', b'"traceEvents": [' + hostile_inputs.DEEP + b",")), 0,
         "skipped events: nested too deep: 1"),
    Case("100k-deep nesting in the header", hostile_inputs.kineto(
        lambda s: s.replace(b'"schemaVersion": 1,', b'"deep": ' + hostile_inputs.DEEP + b",")), 0,
         "rank from distributedInfo.rank"),
    Case("30-digit ProfilerStep#N", hostile_inputs.kineto(lambda s: s.replace(
        b'"profplug.sync.device"', b'"ProfilerStep#' + b"9" * 30 + b'"')), 0,
         "skipped events: step number out of range: 1"),
    Case("5000-digit pid and tid strings", hostile_inputs.kineto(lambda s: s.replace(
        b'"tid": 1,', b'"tid": "' + b"7" * 5000 + b'",', 1).replace(
        b'"pid": 0,', b'"pid": "' + b"9" * 5000 + b'",', 1)), 0, "idle by cause (us)"),
    Case("baseTimeNanoseconds = 2^64", hostile_inputs.kineto(lambda s: s.replace(
        b"1764000000000000000", str(2**64).encode())), 0, "out of range"),
    Case("baseTimeNanoseconds just below 2^63", hostile_inputs.kineto(lambda s: s.replace(
        b"1764000000000000000", str(2**63 - 1000).encode())), 0, "out of range"),
    Case("epoch and relative timestamps mixed", hostile_inputs.kineto(lambda s: s.replace(
        b'"ts": 0,', b'"ts": 1764000000000000,', 1)), 0,
         "skipped events: timestamp style unlike the trace's"),
    Case(".json.gz: 32 MB of spaces before the object",
         hostile_inputs.spaces_bomb, 3, "inflates to more than 16 MiB", ("--max-decompressed", "16M")),
    Case(".json.gz: 33 MB of repeated kernel events", hostile_inputs.kernel_bomb,
         3, "inflates to more than 16 MiB", ("--max-decompressed", "16M")),
    Case(".sqlite.gz of zeros", lambda d: _w(d / "z.sqlite.gz", gzip.compress(
        b"\0" * (5 << 20))), 3, "not a SQLite file"),
    Case("recursive VIEW named CUPTI_ACTIVITY_KIND_KERNEL",
         hostile_inputs.recursive_view("CUPTI_ACTIVITY_KIND_KERNEL"), 0, "rank from"),
    Case("recursive VIEW named StringIds", hostile_inputs.recursive_view("StringIds"), 3,
         "not an Nsight Systems export"),
    Case("recursive VIEW named META_DATA_EXPORT", hostile_inputs.recursive_view("META_DATA_EXPORT"), 0,
         "rank from"),
    Case("WAL-mode export with a hot -wal beside it", hostile_inputs.hot_wal, 0,
         "cudaStreamSynchronize      event"),
    Case("stale, partial .sqlite beside its .nsys-rep (no nsys)", hostile_inputs.stale_partial, 3,
         "is older than the report; nsys not found"),
    Case("export without CUPTI_ACTIVITY_KIND_RUNTIME", lambda d: [hostile_inputs.sql(
        hostile_inputs.small_export(d), "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")], 1, "--strict",
         ("--strict",)),
    Case('a table named with "', lambda d: [hostile_inputs.sql(hostile_inputs.seed_export(d),
                                                  'CREATE TABLE "we""ird" (a INTEGER)')], 0,
         "rank from NVTX mark"),
    Case("profplug.rank \u00b2 mark", lambda d: [hostile_inputs.small_export(d, mark="profplug.rank \u00b2")],
         0, "rank from CUDA device order"),
    Case("terminal escapes in an NVTX name", lambda d: [hostile_inputs.small_export(
        d, nvtx="\x1b]8;;https://example.com\x07click\x1b]8;;\x07\x1b[31m")], 0,
         "\\x1b]8;;https://example.com\\x07click"),
    Case("a FIFO", hostile_inputs.fifo, 3, "not a regular file (a FIFO)"),
    Case("newline in a file name", lambda d: _w(d / "bad\nname.json", b""), 3,
         "bad\\nname.json: empty file"),
    Case("run.json two directories up", hostile_inputs.run_json_two_up, 0,
         "rank from distributedInfo.rank", ("--strict",)),
    Case("run.json nested 100k deep", hostile_inputs.deep_run_json, 0, "rank from distributedInfo.rank"),
]


def report_argv(case: Case, d: Path) -> list[str]:
    """Build the case's input in ``d``; the ``profplug report`` arguments that read it."""
    return ["report", *map(str, case.build(d)), *case.args, "--jobs", "1"]


def run_case(case: Case, d: Path) -> subprocess.CompletedProcess[str]:
    """The case through ``python -m profplug`` in its own process, run from ``d``."""
    return subprocess.run([sys.executable, "-m", "profplug", *report_argv(case, d)],
                          capture_output=True, text=True, timeout=120, cwd=d)
