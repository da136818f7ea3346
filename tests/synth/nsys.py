"""Build synthetic Nsight Systems SQLite exports with exactly known answers (times in us).

Tables and columns follow the documented export schema (Nsight Systems user guide, "SQLite
schema reference"): StringIds, CUPTI_ACTIVITY_KIND_RUNTIME / KERNEL / MEMCPY / MEMSET /
SYNCHRONIZATION / CUDA_EVENT, NVTX_EVENTS, PROCESSES, ThreadNames, and the export metadata
table (``EXPORT_META_DATA`` in 2022.x, ``META_DATA_EXPORT`` later).

A :class:`NsysProcess` records a process's events through the same methods as
:class:`~synth.kineto.KinetoTrace` (:class:`synth.recorder.Recorder`), so one scenario
function writes both formats.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYNC_TYPES = {"Event Sync": 1, "Stream Wait Event": 2, "Stream Sync": 3, "Context Sync": 4}
COPY_KINDS = {"HtoD": 1, "DtoH": 2, "DtoD": 8}

STYLES: dict[str, dict[str, str]] = {
    "2022.4": {"table": "EXPORT_META_DATA", "schema": "3.0.0", "product": "2022.4.2.1"},
    "2025.3": {"table": "META_DATA_EXPORT", "schema": "3.20.1", "product": "2025.3.1.90"},
}

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {meta} (name TEXT NOT NULL, value TEXT);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
  nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
  registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
  dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
  localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER,
  graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
  deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,
  srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
  graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL,
  graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL,
  end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT (deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, eventId INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
  int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
  floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
"""
OPTIONAL = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
            "NVTX_EVENTS", "PROCESSES", "ThreadNames")


TIMED = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
         "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
         "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")  # (start, end, ...) rows


def _ns(us: float) -> int:
    return round(us * 1000)


def global_pid(pid: int, vm: int = 0) -> int:
    return (vm << 56) | (pid << 24)


def global_tid(pid: int, tid: int, vm: int = 0) -> int:
    return global_pid(pid, vm) | tid


@dataclass
class NsysProcess:
    """One process of the export; its recording methods are ``synth.recorder.Recorder``'s."""

    export: NsysExport
    pid: int
    name: str = "python3"
    _corr: int = 100
    vm: int = 0  # the VM/host id in globalPid's top bits

    @property
    def gpid(self) -> int:
        return global_pid(self.pid, self.vm)

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def runtime(self, name: str, start: float, dur: float, tid: int = 1,
                corr: int | None = None, cat: str = "cuda_runtime") -> int:
        corr = self.next_corr() if corr is None else corr
        ex = self.export
        ex.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
            (_ns(start), _ns(start + dur), 1, global_tid(self.pid, tid, self.vm), corr,
             ex.sid(ex.api_name(name)), 0, None))
        return corr

    def gpu(self, start: float, dur: float, name: str = "gemm_kernel", stream: int = 7,
            device: int = 0, corr: int = -1, cat: str = "kernel") -> None:
        ex = self.export
        s, e, c = _ns(start), _ns(start + dur), (None if corr < 0 else corr)
        if cat == "kernel":
            short = name.split("(")[0].split()[-1]
            ex.rows["CUPTI_ACTIVITY_KIND_KERNEL"].append(
                (s, e, device, 1, stream, c, self.gpid, ex.sid(name), ex.sid(short), None, 0, 0,
                 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 1, 0, None, None))
        elif cat == "gpu_memcpy":
            kind = next((v for k, v in COPY_KINDS.items() if k in name), 0)
            ex.rows["CUPTI_ACTIVITY_KIND_MEMCPY"].append(
                (s, e, device, 1, stream, c, self.gpid, 4096, kind, None, 0, 0, device, 1,
                 device, 1, 0, None, None))
        elif cat == "gpu_memset":
            ex.rows["CUPTI_ACTIVITY_KIND_MEMSET"].append(
                (s, e, device, 1, stream, c, self.gpid, 0, 4096, None, 0))
        else:
            raise ValueError(cat)

    def launch(self, at: float, start: float, dur: float, name: str = "gemm_kernel",
               stream: int = 7, device: int = 0, tid: int = 1, api_dur: float = 1.0) -> int:
        corr = self.runtime("cudaLaunchKernel", at, api_dur, tid=tid)
        self.gpu(start, dur, name, stream, device, corr)
        return corr

    def annotation(self, name: str, start: float, dur: float, tid: int = 1,
                   registered: bool | None = None, start_end: bool = False,
                   domain: int = 0, json_text: str | None = None) -> None:
        """An NVTX range; ``registered`` puts its text in StringIds (textId); ``json_text``:
        an extended payload exported as JSON (NVTX_EVENTS.jsonText)."""
        ex = self.export
        reg = ex.registered if registered is None else registered
        text, tid_ = (None, ex.sid(name)) if reg else (name, None)
        ex.rows["NVTX_EVENTS"].append(
            (_ns(start), _ns(start + dur), 60 if start_end else 59, None, None, None, text,
             global_tid(self.pid, tid, self.vm), None, tid_, domain, None, None, None, None, None, None,
             None, json_text))

    def mark(self, text: str, at: float = 0.0, tid: int = 1) -> None:
        self.export.rows["NVTX_EVENTS"].append(
            (_ns(at), None, 34, None, None, None, text, global_tid(self.pid, tid, self.vm), None, None,
             0, None, None, None, None, None, None, None, None))

    def domain_create(self, name: str, domain: int = 1, at: float = 0.0) -> None:
        """An NVTX domain-create event (eventType 75, text = domain name)."""
        self.export.rows["NVTX_EVENTS"].append(
            (_ns(at), None, 75, None, None, None, name, global_tid(self.pid, 1, self.vm), None, None,
             domain, None, None, None, None, None, None, None, None))

    def rank_mark(self, rank: int, at: float = 0.0) -> None:
        self.mark(f"profplug.rank {rank}", at)

    def write(self, path: Path) -> Path:
        """The whole export this process belongs to, at ``path``."""
        return self.export.write(path)

    def cuda_sync(self, kind: str, start: float, dur: float, stream: int = 7, device: int = 0,
                  corr: int = -1, wait_on_stream: int | None = None,
                  wait_corr: int | None = None) -> None:
        """A SYNCHRONIZATION row; a wait's event record becomes a CUDA_EVENT row."""
        ex = self.export
        event_id = 0
        if wait_corr is not None:
            ex._event += 1
            event_id = ex._event
            ex.rows["CUPTI_ACTIVITY_KIND_CUDA_EVENT"].append(
                (device, 1, -1 if wait_on_stream is None else wait_on_stream, wait_corr,
                 self.gpid, event_id))
        ex.rows["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"].append(
            (_ns(start), _ns(start + dur), device, 1, -1 if stream < 0 else stream,
             None if corr < 0 else corr, self.gpid, SYNC_TYPES[kind], event_id))


@dataclass
class NsysExport:
    style: str = "2025.3"
    api_suffix: bool = True  # runtime names like cudaDeviceSynchronize_v3020
    registered: bool = False  # NVTX texts in StringIds (textId) instead of text
    omit: set[str] = field(default_factory=set)  # optional tables to leave out
    base_ns: int = 0  # added, as an integer, to every start and end (epoch-scale times)
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    processes: list[NsysProcess] = field(default_factory=list)
    _strings: dict[str, int] = field(default_factory=dict)
    _event: int = 0

    def __post_init__(self) -> None:
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", *OPTIONAL):
            self.rows.setdefault(t, [])

    def process(self, pid: int = 4242, name: str = "python3") -> NsysProcess:
        p = NsysProcess(self, pid, name)
        self.processes.append(p)
        return p

    def sid(self, s: str) -> int:
        if s not in self._strings:
            self._strings[s] = len(self._strings) + 1
        return self._strings[s]

    def api_name(self, name: str) -> str:
        return f"{name}_v3020" if self.api_suffix else name

    def write(self, path: Path) -> Path:
        style = STYLES[self.style]
        gz = path.name.endswith(".gz")
        db_path = path.with_name(path.name[:-3]) if gz else path
        db_path.unlink(missing_ok=True)
        con = sqlite3.connect(db_path)
        con.executescript(SCHEMA.format(meta=style["table"]))
        for t in self.omit:
            con.execute(f"DROP TABLE {t}")
        con.executemany(f"INSERT INTO {style['table']} VALUES (?, ?)", [
            ("EXPORT_SCHEMA_VERSION", style["schema"]),
            *zip(("EXPORT_SCHEMA_VERSION_MAJOR", "EXPORT_SCHEMA_VERSION_MINOR",
                  "EXPORT_SCHEMA_VERSION_MICRO"), style["schema"].split("."), strict=True),
            ("EXPORT_PRODUCT_VERSION", style["product"])])
        self.rows["PROCESSES"] = [(p.gpid, p.pid, p.name) for p in self.processes]
        for t, rows in self.rows.items():
            if t in self.omit or not rows:
                continue
            if self.base_ns and t in TIMED:
                rows = [(r[0] + self.base_ns, None if r[1] is None else r[1] + self.base_ns,
                         *r[2:]) for r in rows]
            marks = ",".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {t} VALUES ({marks})", rows)
        con.executemany("INSERT INTO StringIds VALUES (?, ?)",
                        [(i, s) for s, i in self._strings.items()])
        con.commit()
        con.close()
        if gz:
            with open(db_path, "rb") as src, gzip.open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
            db_path.unlink()
        return path
