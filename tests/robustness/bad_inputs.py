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
         "corrupt gzip"),
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


def run_case(case: Case, d: Path) -> subprocess.CompletedProcess[str]:
    paths = case.build(d)
    return subprocess.run([sys.executable, "-m", "profplug", "report", *map(str, paths),
                           *case.args, "--jobs", "1"], capture_output=True, text=True,
                          timeout=120, cwd=d)
