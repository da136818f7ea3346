"""Builders of the hostile inputs that scripts/attacks.py runs (issue #18, round 2).

Each builder writes its input into a directory and returns the ``profplug`` arguments.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from synth import NsysExport  # noqa: E402

NSYS_SEED = ROOT / "sample_traces" / "pp2_infer_nsys" / "device" / "report.sqlite.gz"
BASE_NS = 1_764_000_000_000_000_000
Build = Callable[[Path], list[str]]


# ------------------------------------------------------------------------------ Kineto
def launch_pairs(n: int, t0: float = 0.0) -> list[bytes]:
    """``n`` cudaLaunchKernel + kernel event pairs (JSON texts), 10 us apart."""
    out = []
    for k in range(n):
        ts = t0 + 10.0 * k
        out.append(b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, '
                   b'"tid": 1, "ts": %.3f, "dur": 1.0, "args": {"correlation": %d}}'
                   % (ts, 1000 + k))
        out.append(b'{"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, '
                   b'"ts": %.3f, "dur": 5.0, "args": {"device": 0, "stream": 7, '
                   b'"correlation": %d, "grid": [128, 1, 1], "block": [256, 1, 1]}}'
                   % (ts + 2.0, 1000 + k))
    return out


def kineto_bytes(events: list[bytes], base: int | str = BASE_NS, head: bytes = b"",
                 tail: bytes = b"") -> bytes:
    return (b'{"schemaVersion": 1, "deviceProperties": [], ' + head
            + b'"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, '
            b'"traceEvents": [\n' + b",\n".join(events) + b"\n], " + tail
            + b'"baseTimeNanoseconds": ' + str(base).encode() + b"}")


def events_for_mb(mb: float) -> list[bytes]:
    return launch_pairs(max(1, int(mb * 1e6 / 380)))


def write(d: Path, name: str, data: bytes) -> list[str]:
    p = d / name
    p.write_bytes(data)
    return ["report", str(p), "--jobs", "1"]


def bad_token(mb: float, token: bytes, where: float = 0.5) -> Build:
    def build(d: Path) -> list[str]:
        ev = events_for_mb(mb)
        k = int(len(ev) * where) | 1  # a kernel
        ev[k] = ev[k].replace(b'"dur": 5.0', b'"dur": ' + token)
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


def surrogate_first_kernel(d: Path) -> list[str]:
    ev = launch_pairs(2000)
    ev[1] = ev[1].replace(b"gemm_kernel", b"gemm\\ud800kernel")
    return write(d, "rank0.json", kineto_bytes(ev))


def gz_stream(parts: list[bytes | tuple[bytes, int]]) -> bytes:
    """gzip of the parts; (chunk, n) repeats chunk n times without building it whole."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = []
    for p in parts:
        chunk, n = p if isinstance(p, tuple) else (p, 1)
        for _ in range(n):
            out.append(c.compress(chunk))
    out.append(c.flush())
    return b"".join(out)


def spaces_gz(where: str) -> Build:
    """~20 MB of gzip that inflates to ~20 GB of spaces before/inside the object."""
    def build(d: Path) -> list[str]:
        ev = launch_pairs(100)
        spaces = (b" " * (1 << 20), 20_000)
        if where == "before":
            parts = [spaces, kineto_bytes(ev)]
        elif where == "between events":
            body = kineto_bytes(ev)
            i = body.index(b",\n", len(body) // 2)
            parts = [body[:i + 1], spaces, body[i + 1:]]
        else:  # after the array
            body = kineto_bytes(ev)
            i = body.rindex(b'"baseTimeNanoseconds"')
            parts = [body[:i], spaces, body[i:]]
        return write(d, "rank0.json.gz", gz_stream(parts))
    return build


def kernels_gz(d: Path) -> list[str]:
    """Repeated kernel events: ~20 MB of gzip, ~20 GB of JSON."""
    k = (b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, '
         b'"dur": 1.0},\n')
    block = k * (1 << 14)
    head = b'{"distributedInfo": {"rank": 0}, "traceEvents": [\n'
    tail = k.rstrip(b",\n") + b'], "baseTimeNanoseconds": 1}'
    return write(d, "rank0.json.gz", gz_stream([head, (block, 20_000), tail]))


def one_big_event(mb: int) -> Build:
    def build(d: Path) -> list[str]:
        ev = launch_pairs(1000)
        big = (b'{"ph": "X", "cat": "cpu_op", "name": "big", "pid": 7, "tid": 1, "ts": 1.0, '
               b'"dur": 1.0, "args": {"blob": "' + b"x" * (mb << 20) + b'"}}')
        return write(d, "rank0.json", kineto_bytes([*ev[:1000], big, *ev[1000:]]))
    return build


def deep(where: str, depth: int = 100_000) -> Build:
    nest = b"[" * depth + b"]" * depth

    def build(d: Path) -> list[str]:
        ev = launch_pairs(100)
        if where == "args":
            ev[11] = ev[11].replace(b'"args": {', b'"args": {"deep": ' + nest + b", ")
            return write(d, "rank0.json", kineto_bytes(ev))
        if where == "header":
            return write(d, "rank0.json", kineto_bytes(ev, head=b'"deep": ' + nest + b", "))
        if where == "event list":
            return write(d, "rank0.json", kineto_bytes([*ev[:50], nest, *ev[50:]]))
        (d / "kineto").mkdir()
        write(d / "kineto", "rank0.json", kineto_bytes(ev))
        (d / "run.json").write_bytes(b'{"command": ' + nest + b"}")
        return ["report", str(d / "kineto"), "--jobs", "1"]
    return build


def numbers(case: str) -> Build:
    def build(d: Path) -> list[str]:
        ev = launch_pairs(100)
        base: int | str = BASE_NS
        if case == "30-digit ProfilerStep#N":
            ev.append(b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#'
                      + b"9" * 30 + b'", "pid": 7, "tid": 1, "ts": 1.0, "dur": 900.0}')
        elif case == "5000-digit step number":
            ev.append(b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#'
                      + b"9" * 5000 + b'", "pid": 7, "tid": 1, "ts": 1.0, "dur": 900.0}')
        elif case == "huge string tid":
            ev[0] = ev[0].replace(b'"tid": 1', b'"tid": "' + b"9" * 40 + b'"')
        elif case == "5000-digit pid":
            ev[1] = ev[1].replace(b'"pid": 0', b'"pid": "' + b"7" * 5000 + b'"')
        elif case == "baseTimeNanoseconds 2^64":
            base = 2**64
        elif case == "baseTimeNanoseconds near int64 max":
            base = 2**63 - 1000
        elif case == "epoch and relative ts mixed":
            ev = [e.replace(b'"ts": ', b'"ts": 17640000000000', 1) if i < 20 else e
                  for i, e in enumerate(ev)]
            base = 0
        return write(d, "rank0.json", kineto_bytes(ev, base=base))
    return build


def bad_utf8_big(mb: float) -> Build:
    def build(d: Path) -> list[str]:
        ev = events_for_mb(mb)
        ev[len(ev) // 2 | 1] = ev[len(ev) // 2 | 1].replace(b"gemm_kernel", b"gemm_\xffkernel")
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


def whatif_near_limit(d: Path) -> list[str]:
    """baseTimeNanoseconds just below 2^63: relative times wrap past the int64 limit."""
    args = numbers("baseTimeNanoseconds near int64 max")(d)
    return [*args, "--whatif"]


def nsys_near_limit(d: Path) -> list[str]:
    """An Nsight export whose timestamps sit just below 2^63 ns."""
    ex = NsysExport()
    p = ex.process()
    t0 = (2**63 - 10**9) / 1000
    for k in range(20):
        p.launch(t0 + 20 * k, t0 + 20 * k + 1, 5)
        p.runtime("cudaDeviceSynchronize", t0 + 20 * k + 2, 6)
    return ["report", str(ex.write(d / "report.sqlite")), "--whatif", "--jobs", "1"]


# ---------------------------------------------------------------------------- analysis
def long_sync_short_syncs(n: int) -> Build:
    """One long cudaStreamSynchronize on thread 2, n short ones on thread 1, a gap each."""
    def build(d: Path) -> list[str]:
        ev = [b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 7, '
              b'"tid": 2, "ts": 0.0, "dur": %.1f}' % (20.0 * n + 100)]
        for k in range(n):
            t = 20.0 * k
            ev.append(b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
                      b'"ts": %.1f, "dur": 5.0}' % t)
            ev.append(b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", '
                      b'"pid": 7, "tid": 1, "ts": %.1f, "dur": 1.0}' % (t + 1.0))
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


def nested_annotations(n: int) -> Build:
    """n nested user annotations on one thread, then n sync calls after the nest closed."""
    def build(d: Path) -> list[str]:
        ev = []
        for k in range(n):
            ev.append(b'{"ph": "X", "cat": "user_annotation", "name": "level%d", "pid": 7, '
                      b'"tid": 1, "ts": %.1f, "dur": %.1f}' % (k, 5.0 * k, 10.0 * (n - k)))
        t0 = 10.0 * n + 10
        for k in range(n):
            ev.append(b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", '
                      b'"pid": 7, "tid": 1, "ts": %.1f, "dur": 1.0}' % (t0 + 5.0 * k))
        ev.append(b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0.0, '
                  b'"dur": 1.0}')
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


# ------------------------------------------------------------------------------ Nsight
def seed_export(d: Path, name: str = "report.sqlite") -> Path:
    p = d / name
    p.write_bytes(gzip.decompress(NSYS_SEED.read_bytes()))
    return p


def sql(p: Path, *stmts: str) -> None:
    con = sqlite3.connect(p)
    for s in stmts:
        con.execute(s)
    con.commit()
    con.close()


def recursive_view(table: str) -> Build:
    def build(d: Path) -> list[str]:
        p = seed_export(d)
        sql(p, f'DROP TABLE "{table}"',
            f'CREATE VIEW "{table}" AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL '
            "SELECT n + 1 FROM r) SELECT n AS id, n AS value, n AS name, n AS start, "
            'n AS "end", n AS deviceId, n AS streamId, n AS correlationId, n AS globalPid, '
            "n AS demangledName, n AS shortName FROM r")
        return ["report", str(p), "--jobs", "1"]
    return build


def stringids_no_index(d: Path) -> list[str]:
    ex = NsysExport()
    p = ex.process()
    for k in range(20_000):
        p.launch(10.0 * k, 10.0 * k + 2, 5, name=f"kernel_{k}")
    db = ex.write(d / "report.sqlite")
    sql(db, "CREATE TABLE s2 (id INTEGER, value TEXT)", "INSERT INTO s2 SELECT * FROM StringIds",
        "DROP TABLE StringIds", "ALTER TABLE s2 RENAME TO StringIds")
    return ["report", str(db), "--jobs", "1"]


def sqlite_gz_zeros(d: Path) -> list[str]:
    p = d / "report.sqlite.gz"
    p.write_bytes(gz_stream([(b"\0" * (1 << 20), 5_300)]))
    return ["report", str(p), "--jobs", "1"]


def hot_wal(d: Path) -> list[str]:
    p = seed_export(d)
    code = ("import sqlite3, os, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0'); "
            "c.execute(\"INSERT INTO StringIds VALUES (999999, 'x')\"); c.commit(); os._exit(0)")
    subprocess.run([sys.executable, "-c", code, str(p)], check=True)
    return ["report", str(p), "--jobs", "1"]


def wal_readonly_dir(d: Path) -> list[str]:
    """A WAL-mode export, closed cleanly, in a read-only directory."""
    ro = d / "ro"
    ro.mkdir()
    p = seed_export(ro)
    sql(p, "PRAGMA journal_mode=WAL")
    ro.chmod(0o555)
    return ["report", str(p), "--jobs", "1"]


def stale_export(d: Path) -> list[str]:
    rep = d / "report.nsys-rep"
    rep.write_bytes(b"not really a report")
    p = seed_export(d)
    sql(p, "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME", "DROP TABLE NVTX_EVENTS")
    os.utime(p, (1_000_000_000, 1_000_000_000))
    return ["report", str(d), "--strict", "--jobs", "1"]


def quote_table(d: Path) -> list[str]:
    p = seed_export(d)
    sql(p, 'CREATE TABLE "we""ird" (a INTEGER)')
    return ["report", str(p), "--jobs", "1"]


def rank_superscript(d: Path) -> list[str]:
    ex = NsysExport()
    p = ex.process()
    p.mark("profplug.rank \u00b2")
    p.launch(0, 2, 5)
    return ["report", str(ex.write(d / "report.sqlite")), "--jobs", "1"]


def nvtx_escape(d: Path) -> list[str]:
    ex = NsysExport()
    p = ex.process()
    p.annotation("\x1b]8;;https://example.com\x07click\x1b]8;;\x07\x1b[31m", 0, 30)
    p.launch(1, 2, 5)
    p.runtime("cudaDeviceSynchronize", 3, 10)
    p.launch(14, 20, 5)
    return ["report", str(ex.write(d / "report.sqlite")), "--jobs", "1"]


# ------------------------------------------------------------------------------- other
def fifo(d: Path) -> list[str]:
    os.mkfifo(d / "rank0.json")
    return ["report", str(d / "rank0.json"), "--jobs", "1"]


def newline_name(d: Path) -> list[str]:
    return write(d, "bad\nname.json", b"")


def run_json_two_up(d: Path) -> list[str]:
    (d / "a" / "b").mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"missing_ranks": [5], "command": ["foreign"]}))
    write(d / "a" / "b", "rank0.json", kineto_bytes(launch_pairs(10)))
    return ["report", str(d / "a" / "b"), "--strict", "--jobs", "1"]


def compare_label(d: Path) -> list[str]:
    a = d / '<a href="javascript:void(0)">link<span style="font-size:90px;color:red">big'
    b = d / "b"
    for x in (a, b):
        x.mkdir()
        write(x, "rank0.json", kineto_bytes(launch_pairs(10)))
    return ["compare", str(a), str(b), "--html", str(d / "c.html")]
