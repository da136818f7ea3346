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
  the step rule (``steps.rule``) picks the steps among them; marks (34) ``profplug.rank R``
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
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import TraceKind
from profplug.analyzers.readers.blocks import regular_file
from profplug.analyzers.readers.nsys.comm import fill_comm, nccl_peers
from profplug.analyzers.readers.nsys.fetch import Fetcher
from profplug.analyzers.readers.nsys.pids import NO_PROCESS, PROCESS_MASK
from profplug.analyzers.readers.nsys.source import (
    Export,
    guard,
    open_export,
    sqlite_file,
    sqlite_why,
)
from profplug.analyzers.readers.nsys.tables import (
    API_COLS,
    I64,
    RUNTIME,
    SYNC,
    Tables,
    read_tables,
)
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule, apply_steps

RULE_MARK = "NVTX mark profplug.rank"
RULE_ORDER = "CUDA device order, then process id (no profplug.rank mark)"
ABSURD = "negative or absurd duration"
OUT_OF_RANGE = "timestamp out of range"


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


def _timelines(ex: Export, fx: Fetcher, steps: StepRule) -> list[Timeline]:
    t = read_tables(ex, fx)
    pids = sorted(set(np.unique(t.gpu["pid"]).tolist()) | set(t.marks))
    if not pids:
        dropped_rows = f" ({t.bad_pids.size} row(s) with absurd times skipped)" \
            if t.bad_pids.size else ""
        raise TraceError(f"{ex.path}: no CUDA kernels, memcpys or memsets in this export"
                         f"{dropped_rows} (was it captured with -t cuda?)")
    dropped = sorted(set(t.api_of) - set(pids))
    ranks = _assign_ranks(pids, t.gpu, t.marks)
    pnames = _process_names(ex)
    peers = nccl_peers(ex)
    out: list[Timeline] = []
    for p in pids:
        first = not out
        tl = _process_timeline(ex, t, p, ranks[p], pnames.get(p, ""), first)
        _fill_sync(tl, t.sync, t.sync["pid"] == p)
        _fill_ann(tl, t.ann, t.ann["pid"] == p, steps)
        fill_comm(tl, p, peers)
        tl.api_tops()  # the nesting column, once
        if first:
            _export_notes(tl, ex, dropped)
        out.append(tl)
    return out


def _process_timeline(ex: Export, t: Tables, p: int, rank_rule: tuple[int, str], name: str,
                      first: bool) -> Timeline:
    """Process ``p``'s timeline (GPU work and host calls; its syncs and ranges not yet
    filled), with its skipped rows (``first``: the rows of no process too)."""
    rank, rule = rank_rule
    a = t.api_of[p] if p in t.api_of else \
        {k: np.zeros(0, dtype=np.int32 if k == "name" else I64) for k in API_COLS}
    gpu, gm = t.gpu, t.gpu["pid"] == p
    tl = Timeline(
        rank=rank, source=TraceKind.NSYS, files=[str(ex.path)], rank_rule=rule, names=t.syms.names,
        gpu_start_ns=gpu["start"][gm], gpu_end_ns=gpu["end"][gm],
        gpu_device=gpu["device"][gm], gpu_stream=gpu["stream"][gm],
        gpu_kind=gpu["kind"][gm], gpu_name=gpu["name"][gm], gpu_corr=gpu["corr"][gm],
        api_start_ns=a["start"], api_end_ns=a["end"], api_tid=a["tid"],
        api_name=a["name"], api_corr=a["corr"],
        has_gpu_sync_records=ex.has(SYNC),
        metadata={"pid": p & 0xFFFFFF, "process_key": p, "process_name": name,
                  "schema_version": ex.schema_version, "meta_table": ex.meta_table,
                  "nsys_version": ex.meta.get("EXPORT_PRODUCT_VERSION",
                                              ex.meta.get("NSYS_VERSION", ""))})
    tl.skip(ABSURD, int((t.bad_pids == p).sum()))
    tl.skip(OUT_OF_RANGE, int((t.bad_pids == -p - 1).sum()))
    if first:
        tl.skip(NO_PROCESS, t.no_pid)
    dangling = int(np.isin(a["name"], list(t.syms.dangling)).sum()) if t.syms.dangling else 0
    if dangling:
        tl.warnings.append(f"{dangling} host call(s) named by an id missing from StringIds "
                           "(<string id N>): not classified, their gaps count as "
                           "host_bound or other")
    return tl


def _export_notes(tl: Timeline, ex: Export, dropped: list[int]) -> None:
    """The export's own warnings, on its first timeline: the reader's, a missing runtime
    table, the processes without GPU work (``dropped``)."""
    tl.warnings += ex.warnings
    if not ex.has(RUNTIME):
        tl.warnings.append(f"no {RUNTIME} table: no host API calls, so every gap "
                           "is 'other' (a partial export?)")
    if dropped:
        tl.warnings.append(f"processes without GPU work skipped: pid "
                           f"{', '.join(str(d & 0xFFFFFF) for d in dropped)}")


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
    not depend on it. ``steps``: which NVTX ranges are steps (``steps.rule``; default
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
