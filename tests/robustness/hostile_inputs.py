"""Hostile bad inputs: hostile tokens, bombs, huge numbers, odd exports.

Small, deterministic versions of the attacks in scripts/attacks.py; each is a ``Case`` of
``bad_inputs`` (built in a directory, run through ``profplug report``, checked by
test_robust_cli_inputs.py and listed in docs/robustness.md by scripts/robustness_table.py).
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

from synth import NsysExport, mixed_trace

ROOT = Path(__file__).resolve().parents[2]
NSYS_SEED = ROOT / "sample_traces" / "pp2_infer_nsys" / "device" / "report.sqlite.gz"
DEEP = b"[" * 100_000 + b"]" * 100_000


def seed() -> bytes:
    return json.dumps(mixed_trace().to_dict(), indent=1).encode()


def write(p: Path, data: bytes) -> list[Path]:
    p.write_bytes(data)
    return [p]


def kineto(edit: Callable[[bytes], bytes], name: str = "rank0.json") -> Callable[[Path],
                                                                                  list[Path]]:
    return lambda d: write(d / name, edit(seed()))


def gz_repeat(head: bytes, chunk: bytes, n: int, tail: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [c.compress(head)] + [c.compress(chunk) for _ in range(n)]
    return b"".join([*out, c.compress(tail), c.flush()])


def spaces_bomb(d: Path) -> list[Path]:
    body = seed()
    return write(d / "rank0.json.gz", gz_repeat(b"", b" " * (1 << 20), 32, body))


def kernel_bomb(d: Path) -> list[Path]:
    k = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1},\n'
    return write(d / "rank0.json.gz", gz_repeat(b'{"traceEvents": [\n', k * 4096, 100,
                                                k.rstrip(b",\n") + b"]}"))


def no_closing_brace(s: bytes) -> bytes:
    """The kernel of 16 us loses the brace that closes it."""
    i = s.index(b'"ts": 16,')
    j = s.index(b"}\n  }", i)  # its args' brace, then its own (at j + 4)
    return s[:j + 4] + s[j + 5:]


def seed_export(d: Path, name: str = "report.sqlite") -> Path:
    p = d / name
    p.write_bytes(gzip.decompress(NSYS_SEED.read_bytes()))
    return p


def sql(p: Path, *stmts: str) -> Path:
    conn = sqlite3.connect(p)
    for s in stmts:
        conn.execute(s)
    conn.commit()
    conn.close()
    return p


def recursive_view(table: str) -> Callable[[Path], list[Path]]:
    def build(d: Path) -> list[Path]:
        p = sql(seed_export(d), f'DROP TABLE "{table}"',
                f'CREATE VIEW "{table}" AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL '
                "SELECT n + 1 FROM r) SELECT n AS id, n AS value, n AS name, n AS start, "
                'n AS "end", n AS deviceId, n AS streamId, n AS correlationId, '
                "n AS globalPid, n AS demangledName, n AS shortName FROM r")
        return [p]
    return build


def small_export(d: Path, mark: str | None = None, nvtx: str | None = None,
                 name: str = "report.sqlite") -> Path:
    ex = NsysExport()
    p = ex.process()
    if mark is not None:
        p.mark(mark)
    if nvtx is not None:
        p.annotation(nvtx, 0, 30)
    p.launch(1, 2, 5)
    p.runtime("cudaDeviceSynchronize", 3, 10)
    p.launch(14, 20, 5)
    return ex.write(d / name)


def hot_wal(d: Path) -> list[Path]:
    """A WAL-mode export whose last transaction (the sync is renamed cudaStreamSynchronize)
    is only in its -wal file (the writer was killed)."""
    p = small_export(d)
    code = ("import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0'); "
            "c.execute(\"UPDATE StringIds SET value = 'cudaStreamSynchronize_v3020' "
            "WHERE value = 'cudaDeviceSynchronize_v3020'\"); c.commit(); os._exit(0)")
    subprocess.run([sys.executable, "-c", code, str(p)], check=True)
    return [p]


def stale_partial(d: Path) -> list[Path]:
    rep = d / "report.nsys-rep"
    rep.write_bytes(b"a report")
    p = sql(small_export(d), "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    os.utime(p, (1_000_000_000, 1_000_000_000))  # older than the report
    return [d]


def fifo(d: Path) -> list[Path]:
    os.mkfifo(d / "rank0.json")
    return [d / "rank0.json"]


def run_json_two_up(d: Path) -> list[Path]:
    (d / "a" / "b").mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"missing_ranks": [5], "command": ["foreign"]}))
    mixed_trace().write(d / "a" / "b" / "rank0.json")
    return [d / "a" / "b"]


def deep_run_json(d: Path) -> list[Path]:
    (d / "kineto").mkdir()
    mixed_trace().write(d / "kineto" / "rank0.json")
    (d / "run.json").write_bytes(b'{"command": ' + DEEP + b"}")
    return [d]
