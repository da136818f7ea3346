"""An Nsight export's tables read into columns (int64 ns times; see ``reader``'s docstring
for the mapping): host calls, GPU work, GPU-side syncs, NVTX ranges and rank marks, with
the rows of absurd times dropped. ``reader`` turns them into one timeline per process."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.core.ranges import parse_rank_mark
from profplug.analyzers.core.timeline import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from profplug.analyzers.readers.nsys.fetch import Fetcher
from profplug.analyzers.readers.nsys.fetch import empty as _empty
from profplug.analyzers.readers.nsys.links import link_waits
from profplug.analyzers.readers.nsys.names import _Symbols
from profplug.analyzers.readers.nsys.pids import drop_null_pid
from profplug.analyzers.readers.nsys.pids import process_of as _pid
from profplug.analyzers.readers.nsys.source import Export

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
NVTX = "NVTX_EVENTS"

NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND = 34, 59, 60
# ENUM_CUDA_MEMCPY_OPER, as Nsight labels copies.
COPY_KINDS = MappingProxyType({0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
                               7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"})
MEMSET_NAME = "[CUDA memset]"
I64 = np.int64


MAX_DUR_NS = 3_600_000_000_000  # one hour: longer rows are CUPTI timestamp garbage
MAX_TIME_NS = 1 << 62  # farther from 0, sums and differences of two times could overflow


Spec = tuple[str, list[str]]  # table, integer column expressions


def _specs(ex: Export) -> dict[str, Spec]:
    """What is read of each table present, by table name (the kernel name column checked)."""
    out: dict[str, Spec] = {}
    if ex.has(RUNTIME):
        out[RUNTIME] = (RUNTIME, ["start", '"end"', "COALESCE(globalTid, 0)",
                                  "COALESCE(correlationId, -1)", "nameId"])
    extra = {KERNEL: next((c for c in ("demangledName", "shortName", "mangledName")
                           if ex.has(KERNEL, c)), ""),
             MEMCPY: "COALESCE(copyKind, 0)" if ex.has(MEMCPY, "copyKind") else "0",
             MEMSET: "0"}
    for t in (KERNEL, MEMCPY, MEMSET):
        if ex.has(t) and extra[t]:
            gpid = "COALESCE(globalPid, 0)" if ex.has(t, "globalPid") else "0"
            out[t] = (t, ["start", '"end"', "deviceId", "streamId",
                          "COALESCE(correlationId, -1)", gpid, extra[t]])
    if ex.has(SYNC):
        ev = "COALESCE(eventId, -1)" if ex.has(SYNC, "eventId") else "-1"
        gpid = "COALESCE(globalPid, 0)" if ex.has(SYNC, "globalPid") else "0"
        out[SYNC] = (SYNC, ["start", '"end"', "deviceId", "streamId",
                            "COALESCE(correlationId, -1)", gpid, "syncType", ev])
    if all(ex.has(CUDA_EVENT, c) for c in ("eventId", "streamId", "correlationId",
                                           "globalPid")):
        out[CUDA_EVENT] = (CUDA_EVENT, ["COALESCE(globalPid, 0)", "eventId", "streamId",
                                        "COALESCE(correlationId, -1)"])
    return out


def _read_runtime(ex: Export, fx: Fetcher, syms: _Symbols) -> dict[str, np.ndarray]:
    if not ex.has(RUNTIME):
        s, e, g, c, n = _empty(5)
    else:
        s, e, g, c, n = fx.fetch(*_specs(ex)[RUNTIME])
    return {"start": s, "end": e, "pid": _pid(g), "tid": g & 0xFFFFFF, "corr": c,
            "name": syms.from_string_ids(n)}


def _gpu_cols(ex: Export, fx: Fetcher, table: str) -> list[np.ndarray]:
    return fx.fetch(*_specs(ex)[table])


def _read_gpu(ex: Export, fx: Fetcher, syms: _Symbols) -> dict[str, np.ndarray]:
    parts: list[tuple[list[np.ndarray], int, np.ndarray]] = []
    if ex.has(KERNEL):
        col = next((c for c in ("demangledName", "shortName", "mangledName")
                    if ex.has(KERNEL, c)), None)
        if col is None:
            raise TraceError(f"{ex.path}: {KERNEL} has no kernel name column")
        cols = _gpu_cols(ex, fx, KERNEL)
        parts.append((cols[:6], KIND_KERNEL, syms.from_string_ids(cols[6])))
    if ex.has(MEMCPY):
        cols = _gpu_cols(ex, fx, MEMCPY)
        lut = np.array([syms.sym(f"[CUDA memcpy {COPY_KINDS.get(k, 'Unknown')}]")
                        for k in range(max(COPY_KINDS) + 2)], dtype=np.int32)
        parts.append((cols[:6], KIND_MEMCPY, lut[np.clip(cols[6], 0, lut.size - 1)]))
    if ex.has(MEMSET):
        cols = _gpu_cols(ex, fx, MEMSET)
        parts.append((cols[:6], KIND_MEMSET,
                      np.full(cols[0].size, syms.sym(MEMSET_NAME), dtype=np.int32)))
    if not parts:
        z = _empty(6)
        return {"start": z[0], "end": z[1], "device": z[2], "stream": z[3], "corr": z[4],
                "pid": z[5], "kind": np.zeros(0, np.int8), "name": np.zeros(0, np.int32)}
    cat = [np.concatenate([p[0][i] for p in parts]) for i in range(6)]
    return {"start": cat[0], "end": cat[1], "device": cat[2], "stream": cat[3],
            "corr": cat[4], "pid": _pid(cat[5]),
            "kind": np.concatenate([np.full(p[0][0].size, p[1], np.int8) for p in parts]),
            "name": np.concatenate([p[2] for p in parts])}


def _read_sync(ex: Export, fx: Fetcher) -> dict[str, np.ndarray]:
    if not ex.has(SYNC):
        z = _empty(8)
    else:
        z = fx.fetch(*_specs(ex)[SYNC])
    d = dict(zip(("start", "end", "device", "stream", "corr", "pid", "kind", "event"), z,
                 strict=True))
    d["pid"] = _pid(d["pid"])
    spec = _specs(ex).get(CUDA_EVENT)
    n = d["start"].size
    d["wait_stream"], d["wait_corr"] = link_waits(d, fx.fetch(*spec)) \
        if spec is not None and n else (np.full(n, -1, dtype=I64), np.full(n, -1, dtype=I64))
    return d


NvtxRows = tuple[list[np.ndarray], dict[int, str]]


def _nvtx_rows(ex: Export, fx: Fetcher, conn: sqlite3.Connection) -> NvtxRows | None:
    """NVTX rows as integer columns (start, end, globalTid, eventType, key), read on ``conn``.

    Literal texts are numbered in a TEMP table of ``conn`` (distinct texts only), so each
    row comes back as integers: key >= 0 is a StringIds id (textId), key <= -2 a literal
    text (``literal[key]``), -1 none. None when the export has no NVTX table.
    """
    if not ex.has(NVTX):
        return None
    types = f"eventType IN ({NVTX_MARK}, {NVTX_PUSHPOP}, {NVTX_STARTEND})"
    literal: dict[int, str] = {}
    key = "COALESCE(textId, -1)" if ex.has(NVTX, "textId") else "-1"
    if ex.has(NVTX, "text"):
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS profplug_nvtx_text "
                     "(id INTEGER PRIMARY KEY, value TEXT UNIQUE)")
        conn.execute("INSERT OR IGNORE INTO profplug_nvtx_text(value) SELECT DISTINCT text "
                     f"FROM {NVTX} WHERE text IS NOT NULL AND {types}")
        literal = {-2 - int(i): str(v) for i, v in
                   conn.execute("SELECT id, value FROM profplug_nvtx_text")}
        key = (f"CASE WHEN text IS NULL THEN {key} ELSE -2 - (SELECT t.id FROM "
               f"profplug_nvtx_text t WHERE t.value = {NVTX}.text) END")
    cols = fx.fetch(NVTX, ["start", 'COALESCE("end", -1)', "COALESCE(globalTid, 0)",
                           "eventType", key], types, conn=conn)  # TEMP table: one conn
    return cols, literal


def _read_nvtx(rows: NvtxRows | None, syms: _Symbols
               ) -> tuple[dict[str, np.ndarray], dict[int, int]]:
    """NVTX ranges (columns) and rank marks (pid -> rank) from :func:`_nvtx_rows`."""
    marks: dict[int, int] = {}
    empty: dict[str, np.ndarray] = {"start": np.zeros(0, I64), "end": np.zeros(0, I64),
                                    "pid": np.zeros(0, I64), "tid": np.zeros(0, I64),
                                    "name": np.zeros(0, np.int32)}
    if rows is None:
        return empty, marks
    (s, e, g, et, k), literal = rows
    pid = _pid(g)
    names = np.full(k.size, -1, dtype=np.int32)
    reg = k >= 0
    names[reg] = syms.from_string_ids(k[reg])
    lit_keys, inv = np.unique(k[k <= -2], return_inverse=True)
    lut = np.array([syms.sym(literal.get(int(x), "<no text>")) for x in lit_keys],
                   dtype=np.int32)
    names[k <= -2] = lut[inv] if lut.size else names[k <= -2]
    names[k == -1] = syms.sym("<no text>")
    is_mark = et == NVTX_MARK
    rank_of = {int(n): r for n in np.unique(names[is_mark])
               if (r := parse_rank_mark(syms.names[n])) is not None}
    for i in np.nonzero(is_mark & np.isin(names, list(rank_of)))[0]:
        marks[int(pid[i])] = rank_of[int(names[i])]
    # a range never ended (end -1, NULL) is not one; an ended one is range-checked as every
    # other row (_drop_absurd: counted as skipped by the caller), not a 9.2e15 us step
    rng = np.nonzero((et != NVTX_MARK) & ((e >= 0) | (e >= s)))[0]
    return {"start": s[rng], "end": e[rng], "pid": pid[rng], "tid": g[rng] & 0xFFFFFF,
            "name": names[rng]}, marks


def _drop_absurd(d: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Rows with end < start, longer than MAX_DUR_NS, or times beyond +-MAX_TIME_NS removed;
    returns their pids too, negated for the out-of-range ones (-(pid + 1))."""
    s, e = d["start"], d["end"]
    in_range = (s >= -MAX_TIME_NS) & (e <= MAX_TIME_NS) & (s <= MAX_TIME_NS)
    dur = np.where(in_range, e - s, -1)  # no int64 wrap-around on far-off values
    ok = in_range & (dur >= 0) & (dur <= MAX_DUR_NS)
    if ok.all():
        return d, np.zeros(0, dtype=I64)
    bad = np.where(in_range, d["pid"], -d["pid"] - 1)[~ok]
    return {k: v[ok] for k, v in d.items()}, bad


API_COLS = ("start", "end", "tid", "corr", "name")


def _by_pid(d: dict[str, np.ndarray]) -> dict[int, dict[str, np.ndarray]]:
    """Host call columns per process (views when there is one process)."""
    pids = np.unique(d["pid"]).tolist()
    if len(pids) == 1:
        return {int(pids[0]): {k: d[k] for k in API_COLS}}
    out = {}
    for p in pids:
        m = d["pid"] == p
        out[int(p)] = {k: d[k][m] for k in API_COLS}
    return out


@dataclass
class Tables:
    """An export's rows (times int64 ns), absurd ones dropped: host calls per process
    (``api_of``), GPU work, GPU-side syncs, NVTX ranges (``ann``) and the rank marks among
    them (pid: rank); ``bad_pids``: per dropped row its pid (-(pid + 1): out of range);
    ``no_pid``: the GPU rows without a process."""

    syms: _Symbols
    api_of: dict[int, dict[str, np.ndarray]]
    gpu: dict[str, np.ndarray]
    sync: dict[str, np.ndarray]
    ann: dict[str, np.ndarray]
    marks: dict[int, int]
    bad_pids: np.ndarray
    no_pid: int


def read_tables(ex: Export, fx: Fetcher) -> Tables:
    """Every table the analysis reads of ``ex``, the big ones on ``fx``'s threads."""
    # NVTX is read on its own connection while the pool reads the big tables.
    nvtx = fx.background(lambda c: _nvtx_rows(ex, fx, c))
    for spec in _specs(ex).values():  # the threads read ahead while this one works
        fx.prefetch(*spec)
    syms = _Symbols(ex.conn)
    api, bad_api = _drop_absurd(_read_runtime(ex, fx, syms))
    api_of = _by_pid(api)  # split while the threads read the GPU tables
    del api
    gpu, bad_gpu = _drop_absurd(_read_gpu(ex, fx, syms))
    sync, bad_sync = _drop_absurd(_read_sync(ex, fx))
    ann, marks = _read_nvtx(nvtx(), syms)
    ann, bad_ann = _drop_absurd(ann)  # as Kineto's: end < start, > 1 h, beyond +-2^62 ns
    gpu, sync, no_pid = drop_null_pid(gpu, sync)
    return Tables(syms, api_of, gpu, sync, ann, marks,
                   np.concatenate([bad_api, bad_gpu, bad_sync, bad_ann]), no_pid)
