"""Builders of the cache attacks of issue #40 (items 5, 6, 7, 14, 16, 20) for
scripts/attacks.py.

Each builder writes its traces into a directory, runs ``profplug`` once to fill a
``--cache`` folder, then changes a trace or the cache the way the attack does, and returns
the arguments of the second run (the one measured). The issue's attack comes first in each
item, then one class of our own ("own").
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from attack_inputs import kineto_bytes, launch_pairs
from synth import NsysExport

Build = Callable[[Path], list[str]]


def _profplug(d: Path, *args: str) -> None:
    """The first run (fills the cache); its output is not the attack's."""
    subprocess.run([sys.executable, "-m", "profplug", *args], cwd=d, capture_output=True,
                   env={**os.environ, "TMPDIR": str(d)}, timeout=600, check=False)


def _kineto(path: Path, n: int = 200, dur: float = 5.0) -> Path:
    body = kineto_bytes(launch_pairs(n)).replace(b'"dur": 5.0', b'"dur": %.1f' % dur)
    path.write_bytes(body)
    return path


# ------------------------------------------------------------------- 5: the WAL
def _hot_kernel(db: Path, shift_ns: int) -> None:
    code = (
        "import sqlite3, os, sys\n"
        "c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL')\n"
        "c.execute('PRAGMA wal_autocheckpoint=0')\n"
        "t = 'CUPTI_ACTIVITY_KIND_KERNEL'\n"
        "cols = [r[1] for r in c.execute(f'PRAGMA table_info({t})')]\n"
        "sel = ', '.join(f'{x} + {sys.argv[2]}' if x in ('start', 'end') else x for x in cols)\n"
        "c.execute(f'INSERT INTO {t} SELECT {sel} FROM {t} LIMIT 1'); c.commit()\n"
        "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(db), str(shift_ns)], check=True)


def wal_gains_rows(case: str) -> Build:
    def build(d: Path) -> list[str]:
        ex = NsysExport()
        p = ex.process()
        for k in range(3):
            p.launch(100.0 * k, 100.0 * k + 2, 10.0)
        db = ex.write(d / "rank0.sqlite")
        target = db
        if case == "report":  # own: the report read through its export
            target = d / "rank0.nsys-rep"
            target.write_bytes(b"the capture")
            os.utime(target, (1_000_000_000, 1_000_000_000))
        _hot_kernel(db, 1_000_000)
        args = ["report", str(target), "--jobs", "1", "--cache", str(d / "cache"), "-f", "json",
                "-o", str(d / "r.json")]
        _profplug(d, *args)
        _hot_kernel(db, 2_000_000)  # the WAL gains a kernel; the main file is unchanged
        return args
    return build


# ------------------------------------------------------------------- 6: the content
def mid_edit(mb: float) -> Build:
    def build(d: Path) -> list[str]:
        n = max(200, int(mb * (1 << 20) / 330))
        f = _kineto(d / "rank0.json", n)
        args = ["report", str(f), "--jobs", "1", "--cache", str(d / "cache"), "-f", "json",
                "-o", str(d / "r.json")]
        _profplug(d, *args)
        st = f.stat()
        with open(f, "r+b") as fh:  # one kernel's duration, in the middle, 5.0 -> 9.0 us
            fh.seek(st.st_size // 2)
            chunk = fh.read(1 << 16)
            i = chunk.index(b'"cat": "kernel"')
            j = chunk.index(b'"dur": 5.0', i) + len(b'"dur": ')
            fh.seek(st.st_size // 2 + j)
            fh.write(b"9")
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # as cp -p / rsync -t keep them
        return args
    return build


# ------------------------------------------------------------------- 7: foreign entries
def foreign_entry(case: str) -> Build:
    def build(d: Path) -> list[str]:
        a = _kineto(d / "a.json", dur=5.0)
        b = _kineto(d / "b.json", dur=9.0)
        extra = ["--no-whatif", "--no-cross-rank"] if case == "ranks" else []
        for f in (a, b):
            _profplug(d, "report", str(f), "--jobs", "1", "--cache", str(d / "cache"), *extra)
        c = d / "cache"
        if case == "npz":
            (src,), (dst,) = c.glob("a.json.*.npz"), c.glob("b.json.*.npz")
            dst.write_bytes(src.read_bytes())
        else:  # own: the kept stall analyses
            first, second = sorted(c.glob("ranks-*.json"), key=lambda p: p.stat().st_mtime_ns)
            second.write_bytes(first.read_bytes())
        return ["report", str(b), "--jobs", "1", "--cache", str(c), *extra]
    return build


# ------------------------------------------------------------------- 14: FIFOs
def fifo_entry(case: str) -> Build:
    def build(d: Path) -> list[str]:
        f = _kineto(d / "rank0.json")
        args = ["report", str(f), "--jobs", "1", "--cache", str(d / "cache")]
        _profplug(d, *args)
        c = d / "cache"
        pattern = ["*.npz"] if case == "npz" else ["ranks-*.json", "run-*.json"]
        for pat in pattern:
            for e in c.glob(pat):
                e.unlink()
                os.mkfifo(e)
        return args
    return build


# ------------------------------------------------------------------- 16: the cache as traces
def cache_inside(case: str) -> Build:
    def build(d: Path) -> list[str]:
        t = d / "traces"
        t.mkdir()
        _kineto(t / "rank0.json")
        inside = t / ".cache"
        if case == "in use":
            args = ["report", str(t), "--jobs", "1", "--cache", str(inside)]
            _profplug(d, *args)
            return args
        # own: a cache another run left inside the traces; this run caches elsewhere
        _profplug(d, "report", str(t), "--jobs", "1", "--cache", str(inside))
        return ["report", str(t), "--jobs", "1", "--cache", str(d / "elsewhere")]
    return build


# ------------------------------------------------------------------- 20: entries validated
def _tamper_npz(entry: Path, change: Callable[[dict, dict], None]) -> None:
    with np.load(entry, allow_pickle=False) as z:
        blobs = {k: z[k] for k in z.files}
    with np.load(io.BytesIO(blobs["t0"].tobytes()), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["__header__"]).decode())
    change(arrays, header)
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    blobs["t0"] = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    with open(entry, "wb") as fh:
        np.savez(fh, **blobs)


NPZ_TAMPER: dict[str, Callable[[dict, dict], None]] = {
    "unequal array lengths": lambda a, h: a.update(gpu_end_ns=a["gpu_end_ns"][:-1]),
    "out-of-range name ids": lambda a, h: a.update(gpu_name=a["gpu_name"] + np.int32(10**6)),
    "an empty name table": lambda a, h: h.update(names=[]),
    "a 2-D step column": lambda a, h: a.update(step_num=a["step_num"].reshape(-1, 1)),
}


def bad_entry(case: str) -> Build:
    def build(d: Path) -> list[str]:
        f = _kineto(d / "rank0.json")
        args = ["report", str(f), "--jobs", "1", "--cache", str(d / "cache")]
        _profplug(d, *args)
        c = d / "cache"
        for e in c.glob("ranks-*.json"):
            e.unlink()  # the stall analyses are made again from the timelines
        for e in c.glob("run-*.json"):
            e.unlink()
        if case in NPZ_TAMPER:
            (entry,) = c.glob("*.npz")
            _tamper_npz(entry, NPZ_TAMPER[case])
            return args
        # own: kept stall analyses whose gap causes point outside CAUSES
        _profplug(d, *args)
        (entry,) = c.glob("ranks-*.json")
        key, _, body = entry.read_bytes().partition(b"\n")
        doc = json.loads(body)
        cause = doc[0]["gaps"]["cause"]
        cause["data"] = base64.b64encode(np.full(cause["shape"][0], 99, dtype=np.int64)
                                         .tobytes()).decode()
        entry.write_bytes(key + b"\n" + json.dumps(doc).encode())
        return [*args, "--no-whatif", "--no-cross-rank"]
    return build
