"""Nsight Systems reader: SQLite export -> one :class:`Timeline` per process with CUDA work.

Times in the export are integer nanoseconds already (one clock for every process).
SQLite does the scanning: each table is read with one SELECT of integer columns straight
into numpy arrays; only NVTX text and the few distinct names become Python strings.

Mapping (see docs/nsight.md):

- ``CUPTI_ACTIVITY_KIND_RUNTIME`` -> ``api_*``; pid = (globalTid >> 24) & 0xFFFFFF,
  tid = globalTid & 0xFFFFFF; names via ``StringIds`` (suffixes like ``_v3020`` kept).
- ``..._KERNEL`` / ``..._MEMCPY`` / ``..._MEMSET`` -> ``gpu_*``; pid from globalPid.
  correlationId is unique per process only: each process becomes its own Timeline, so
  runtime call and GPU op meet on (pid, correlationId).
- ``..._SYNCHRONIZATION`` -> ``gsync_*``; a stream wait (syncType 2) is linked to the
  awaited event record through ``CUPTI_ACTIVITY_KIND_CUDA_EVENT`` (same process and
  eventId, the latest record with a smaller correlationId), when that table exists.
- ``NVTX_EVENTS`` push/pop (59) and start/end (60) ranges -> ``ann_*`` (text or textId),
  the step rule (``steprule``) picks the steps among them; marks (34) ``profplug.rank R``
  give ranks.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import numpy as np
from profplug.analyzers.core.cpus import (
    usable_cpus as default_workers,  # threads for block reads (1 = serial)
)
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.core.ranges import parse_rank_mark
from profplug.analyzers.core.timeline import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, Timeline
from profplug.analyzers.readers.blocks import regular_file
from profplug.analyzers.readers.nsys.comm import fill_comm, nccl_peers
from profplug.analyzers.readers.nsys.fetch import Fetcher
from profplug.analyzers.readers.nsys.fetch import empty as _empty
from profplug.analyzers.readers.nsys.links import link_waits
from profplug.analyzers.readers.nsys.names import _Symbols
from profplug.analyzers.readers.nsys.pids import NO_PROCESS, PROCESS_MASK, drop_null_pid
from profplug.analyzers.readers.nsys.pids import process_of as _pid
from profplug.analyzers.readers.nsys.source import (
    Export,
    guard,
    open_export,
    sqlite_file,
    sqlite_why,
)
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule, apply_steps

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
NVTX = "NVTX_EVENTS"

NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND = 34, 59, 60
# ENUM_CUDA_MEMCPY_OPER, as Nsight labels copies.
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
              7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
MEMSET_NAME = "[CUDA memset]"
RULE_MARK = "NVTX mark profplug.rank"
RULE_ORDER = "CUDA device order, then process id (no profplug.rank mark)"
I64 = np.int64


MAX_DUR_NS = 3_600_000_000_000  # one hour: longer rows are CUPTI timestamp garbage
MAX_TIME_NS = 1 << 62  # farther from 0, sums and differences of two times could overflow
ABSURD = "negative or absurd duration"
OUT_OF_RANGE = "timestamp out of range"


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
    empty = {"start": np.zeros(0, I64), "end": np.zeros(0, I64), "pid": np.zeros(0, I64),
             "tid": np.zeros(0, I64), "name": np.zeros(0, np.int32)}
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


def _assign_ranks(pids: list[int], gpu: dict[str, np.ndarray], marks: dict[int, int]
                  ) -> dict[int, tuple[int, str]]:
    """pid -> (rank, rule): marks first; the rest by CUDA device, then pid, on free ranks."""
    out = {p: (marks[p], RULE_MARK) for p in pids if p in marks}
    rest = [p for p in pids if p not in marks]

    def first_device(p: int) -> int:
        dev = gpu["device"][gpu["pid"] == p]
        return int(dev.min()) if dev.size else 1 << 30

    taken = {r for r, _ in out.values()}
    free = (r for r in itertools.count() if r not in taken)
    for p in sorted(rest, key=lambda p: (first_device(p), p)):
        out[p] = (next(free), RULE_ORDER)
    return out


def _process_names(ex: Export) -> dict[int, str]:
    if not (ex.has("PROCESSES", "pid") and ex.has("PROCESSES", "name")):
        return {}
    key = (f"(globalPid >> 24) & {PROCESS_MASK}" if ex.has("PROCESSES", "globalPid")
           else "pid")
    return {int(p): str(n) for p, n in ex.conn.execute(f"SELECT {key}, name FROM PROCESSES")
            if p is not None}


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


def _timelines(ex: Export, fx: Fetcher, steps: StepRule) -> list[Timeline]:
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
    bad_pids = np.concatenate([bad_api, bad_gpu, bad_sync])
    ann, marks = _read_nvtx(nvtx(), syms)
    ann, bad_ann = _drop_absurd(ann)  # as Kineto's: end < start, > 1 h, beyond +-2^62 ns
    bad_pids = np.concatenate([bad_pids, bad_ann])
    gpu, sync, no_pid = drop_null_pid(gpu, sync)
    pids = sorted(set(np.unique(gpu["pid"]).tolist()) | set(marks))
    if not pids:
        dropped_rows = f" ({bad_pids.size} row(s) with absurd times skipped)" \
            if bad_pids.size else ""
        raise TraceError(f"{ex.path}: no CUDA kernels, memcpys or memsets in this export"
                         f"{dropped_rows} (was it captured with -t cuda?)")
    dropped = sorted(set(api_of) - set(pids))
    no_api = {k: np.zeros(0, dtype=np.int32 if k == "name" else I64) for k in API_COLS}
    ranks = _assign_ranks(pids, gpu, marks)
    pnames = _process_names(ex)
    peers = nccl_peers(ex)
    out: list[Timeline] = []
    for p in pids:
        rank, rule = ranks[p]
        a = api_of.get(p, no_api)
        gm, sm, nm = (gpu["pid"] == p, sync["pid"] == p, ann["pid"] == p)
        tl = Timeline(
            rank=rank, source="nsys", files=[str(ex.path)], rank_rule=rule, names=syms.names,
            gpu_start_ns=gpu["start"][gm], gpu_end_ns=gpu["end"][gm],
            gpu_device=gpu["device"][gm], gpu_stream=gpu["stream"][gm],
            gpu_kind=gpu["kind"][gm], gpu_name=gpu["name"][gm], gpu_corr=gpu["corr"][gm],
            api_start_ns=a["start"], api_end_ns=a["end"], api_tid=a["tid"],
            api_name=a["name"], api_corr=a["corr"],
            has_gpu_sync_records=ex.has(SYNC),
            metadata={"pid": p & 0xFFFFFF, "process_key": p, "process_name": pnames.get(p, ""),
                      "schema_version": ex.schema_version, "meta_table": ex.meta_table,
                      "nsys_version": ex.meta.get("EXPORT_PRODUCT_VERSION",
                                                  ex.meta.get("NSYS_VERSION", ""))})
        tl.skip(ABSURD, int((bad_pids == p).sum()))
        tl.skip(OUT_OF_RANGE, int((bad_pids == -p - 1).sum()))
        if not out:
            tl.skip(NO_PROCESS, no_pid)
        dangling = int(np.isin(a["name"], list(syms.dangling)).sum()) if syms.dangling else 0
        if dangling:
            tl.warnings.append(f"{dangling} host call(s) named by an id missing from StringIds "
                               "(<string id N>): not classified, their gaps count as "
                               "host_bound or other")
        _fill_sync(tl, sync, sm)
        _fill_ann(tl, ann, nm, steps)
        fill_comm(tl, p, peers)
        tl.api_tops()  # the nesting column, once
        if not out:
            tl.warnings += ex.warnings
            if not ex.has(RUNTIME):
                tl.warnings.append(f"no {RUNTIME} table: no host API calls, so every gap "
                                   "is 'other' (a partial export?)")
        if dropped and not out:
            tl.warnings.append(f"processes without GPU work skipped: pid "
                               f"{', '.join(str(d & 0xFFFFFF) for d in dropped)}")
        out.append(tl)
    return out


def _fill_sync(tl: Timeline, sync: dict[str, np.ndarray], sel: np.ndarray) -> None:
    ok = sel & (sync["kind"] >= 1) & (sync["kind"] <= 4)
    tl.skip("unknown SYNCHRONIZATION syncType", int((sel & ~ok).sum()))
    tl.gsync_start_ns, tl.gsync_end_ns = sync["start"][ok], sync["end"][ok]
    tl.gsync_kind = sync["kind"][ok].astype(np.int8)
    tl.gsync_device, tl.gsync_stream = sync["device"][ok], sync["stream"][ok]
    tl.gsync_corr = sync["corr"][ok]
    tl.gsync_wait_stream, tl.gsync_wait_corr = sync["wait_stream"][ok], sync["wait_corr"][ok]


def _fill_ann(tl: Timeline, ann: dict[str, np.ndarray], sel: np.ndarray, steps: StepRule
              ) -> None:
    """The process's NVTX ranges as annotations; the step rule picks the steps among them."""
    tl.ann_start_ns, tl.ann_end_ns = ann["start"][sel], ann["end"][sel]
    tl.ann_tid, tl.ann_name = ann["tid"][sel], ann["name"][sel]
    apply_steps(tl, steps)


def read_nsys(path: str | Path, nsys: str | Path | None = None, *,
              workers: int | None = None, steps: StepRule = DEFAULT_STEPS,
              max_bytes: int | None = None) -> list[Timeline]:
    """Read an Nsight Systems export (``.sqlite``, ``.sqlite.gz``) or report (``.nsys-rep``).

    Returns one Timeline per process with GPU work (or a profplug rank mark), sorted by
    rank. ``nsys`` names the nsys executable used to export a ``.nsys-rep``. Large tables
    are read on ``workers`` threads (default: the usable CPUs; 1 = serial); the result does
    not depend on it. ``steps``: which NVTX ranges are steps (``steprule``; default
    ``ProfilerStep#N``, else ``profplug.step``). ``max_bytes``: the most a ``.sqlite.gz`` may
    inflate to (``--max-decompressed``; None: ``$PROFPLUG_MAX_DECOMPRESSED``, else 2 GiB).
    Raises TraceError with a one-line reason naming the file.
    """
    p = Path(path)
    regular_file(p)  # "no such file", or "not a regular file (a FIFO)"
    with sqlite_file(p, nsys, max_bytes) as db:
        ex = open_export(p, db)
        fx = Fetcher(ex.conn, ex.uri, default_workers() if workers is None else workers,
                     setup=lambda c: guard(c, ex.steps))
        try:
            tls = _timelines(ex, fx, steps)
        except (sqlite3.Error, ValueError, OverflowError) as exc:  # a corrupt file
            raise TraceError(f"{p}: unreadable Nsight export ({sqlite_why(exc, ex.steps)})"
                             ) from None
        finally:
            fx.close()
            ex.conn.close()
    return sorted(tls, key=lambda t: t.rank)
