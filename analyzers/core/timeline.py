"""The normalized per-rank timeline: what every reader produces and every analysis consumes.

All times are integer nanoseconds (``*_ns``, numpy int64) on the trace's own clock; one
rank's arrays share one clock. Names (kernels, API calls, annotations) are ids into the
``names`` symbol table so repeated strings are stored once.

Columns, grouped by table (each table's arrays have one length):

- GPU work (``gpu_*``): kernels, memcpys and memsets. ``gpu_kind`` is one of ``KIND_*``;
  ``gpu_corr`` links the op to the host API call that launched it (-1 unknown).
- Host API calls (``api_*``): CUDA/HIP runtime and driver calls, on host thread ``api_tid``.
  ``api_top`` is the nesting column (as Perfetto's slice depth/parent_id): per call, the
  index of its top-level ancestor on its thread, itself when the call is top-level (a driver
  call inside a runtime call, ``cudaGetDevice`` inside a launch, point to the outer call).
  Readers fill it once (:meth:`Timeline.api_tops`); analyses that count or time host calls
  aggregate top-level calls only, so a nested call's time is charged once.
- Annotations (``ann_*``): host-side ranges (record_function, NVTX push/pop or start/end).
- GPU-side sync records (``gsync_*``): Kineto ``cuda_sync`` events or Nsight
  SYNCHRONIZATION rows; ``gsync_kind`` is one of ``SYNC_*``.
- Steps (``step_*``): the host ranges the step rule picked from the annotations
  (``steps.rule``: by default ``ProfilerStep#N``, ``STEP_RE``, else ``profplug.step``);
  ``steps_rule`` says which rule found them (None: no steps).
- Communication ops (``comm_*``): what the host side of the trace says about each send, recv
  or collective it issued (NCCL kernels carry no peer). One row per description found:

  | column | meaning |
  | --- | --- |
  | ``comm_start_ns``, ``comm_end_ns`` | the host range that describes the op |
  | ``comm_tid`` | its host thread (the thread that launches the op's NCCL kernel) |
  | ``comm_kind`` | ``COMM_SEND``, ``COMM_RECV`` or ``COMM_COLL`` (a collective) |
  | ``comm_peer`` | global rank of the other side: send -> destination, recv -> source, |
  |  | collective -> root (broadcast) or -1; -1 when the source does not say |
  | ``comm_group`` | symbol id of the group's global ranks (``"0,1,2"``), -1 unknown |
  | ``comm_seq`` | the op's sequence number in its group (record_param_comms ``Seq``), -1 |
  | ``comm_name`` | symbol id of the op's name (``send``, ``recv``, ``broadcast``, ...) |
  | ``comm_src`` | where the row came from, one of ``COMM_SOURCES`` (``COMM_SRC_*``) |

  Sources: profplug's own ranges (``profplug.analyzers.core.ranges``: ``peer=R`` in the name; older traces
  have bare names: kind only); torch's ``record_param_comms`` cpu_ops (Kineto with CPU ops:
  ``Collective name``, ``Dst Rank``/``Src Rank``, ``Process Group Ranks``, ``Seq``); torch's
  ``nccl:send A->B`` / ``nccl:recv A<-B`` annotations (ranks within the group, taken as global
  when the group is unknown); NCCL's own NVTX ranges in Nsight (``ncclSend``, ``ncclRecv``,
  ``ncclBroadcast``...; the peer only when the export carries their payload). The readers
  fill the table through ``commops``; ``graph.matching`` ties rows to NCCL kernels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, ClassVar

import numpy as np
from profplug.analyzers.core.atomicfile import write_atomic
from profplug.analyzers.core.memo import Memo, read_only

KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2
KIND_NAMES = ("kernel", "memcpy", "memset")

# CUPTI's CUpti_ActivitySynchronizationType numbering (Nsight's ENUM_CUPTI_SYNC_TYPE).
SYNC_EVENT_SYNC, SYNC_STREAM_WAIT_EVENT, SYNC_STREAM_SYNC, SYNC_CONTEXT_SYNC = 1, 2, 3, 4

# comm_kind values and comm_src values (see the module docstring)
COMM_SEND, COMM_RECV, COMM_COLL = 0, 1, 2
COMM_KINDS = ("send", "recv", "collective")
COMM_SRC_PROFPLUG, COMM_SRC_PARAM_COMMS, COMM_SRC_TORCH, COMM_SRC_NCCL_NVTX = 0, 1, 2, 3
COMM_SOURCES = ("profplug range", "record_param_comms", "torch nccl: annotation",
                "NCCL NVTX range")

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")  # torch.profiler's step ranges

I64 = np.int64


def _empty(dtype: Any = I64) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


@dataclass
class Timeline:
    """One rank's trace, normalized. Times in ns (int64); see the module docstring."""

    rank: int
    source: str  # "kineto" | "nsys"
    files: list[str]
    rank_rule: str = "distributedInfo.rank"  # how ``rank`` was determined
    names: list[str] = field(default_factory=list)

    gpu_start_ns: np.ndarray = field(default_factory=_empty)
    gpu_end_ns: np.ndarray = field(default_factory=_empty)
    gpu_device: np.ndarray = field(default_factory=_empty)
    gpu_stream: np.ndarray = field(default_factory=_empty)
    gpu_kind: np.ndarray = field(default_factory=lambda: _empty(np.int8))
    gpu_name: np.ndarray = field(default_factory=lambda: _empty(np.int32))
    gpu_corr: np.ndarray = field(default_factory=_empty)

    api_start_ns: np.ndarray = field(default_factory=_empty)
    api_end_ns: np.ndarray = field(default_factory=_empty)
    api_tid: np.ndarray = field(default_factory=_empty)
    api_name: np.ndarray = field(default_factory=lambda: _empty(np.int32))
    api_corr: np.ndarray = field(default_factory=_empty)
    api_top: np.ndarray = field(default_factory=_empty)  # top-level ancestor's index

    ann_start_ns: np.ndarray = field(default_factory=_empty)
    ann_end_ns: np.ndarray = field(default_factory=_empty)
    ann_tid: np.ndarray = field(default_factory=_empty)
    ann_name: np.ndarray = field(default_factory=lambda: _empty(np.int32))

    gsync_start_ns: np.ndarray = field(default_factory=_empty)
    gsync_end_ns: np.ndarray = field(default_factory=_empty)
    gsync_kind: np.ndarray = field(default_factory=lambda: _empty(np.int8))
    gsync_device: np.ndarray = field(default_factory=_empty)
    gsync_stream: np.ndarray = field(default_factory=_empty)
    gsync_corr: np.ndarray = field(default_factory=_empty)
    gsync_wait_stream: np.ndarray = field(default_factory=_empty)  # -1 unknown
    gsync_wait_corr: np.ndarray = field(default_factory=_empty)  # event-record corr, -1 unknown

    step_start_ns: np.ndarray = field(default_factory=_empty)
    step_end_ns: np.ndarray = field(default_factory=_empty)
    step_num: np.ndarray = field(default_factory=_empty)

    steps_rule: str | None = None  # the step rule that found step_* (steprule), None: none

    comm_start_ns: np.ndarray = field(default_factory=_empty)
    comm_end_ns: np.ndarray = field(default_factory=_empty)
    comm_tid: np.ndarray = field(default_factory=_empty)
    comm_kind: np.ndarray = field(default_factory=lambda: _empty(np.int8))
    comm_peer: np.ndarray = field(default_factory=_empty)  # global rank, -1 unknown
    comm_group: np.ndarray = field(default_factory=lambda: _empty(np.int32))  # -1 unknown
    comm_seq: np.ndarray = field(default_factory=_empty)  # -1 unknown
    comm_name: np.ndarray = field(default_factory=lambda: _empty(np.int32))
    comm_src: np.ndarray = field(default_factory=lambda: _empty(np.int8))

    has_gpu_sync_records: bool = False  # the trace carried cuda_sync / SYNCHRONIZATION data
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> events skipped
    metadata: dict[str, Any] = field(default_factory=dict)

    # ---- convenience -------------------------------------------------------------------
    def name(self, idx: int) -> str:
        return self.names[idx]

    @property
    def n_gpu(self) -> int:
        return int(self.gpu_start_ns.size)

    @property
    def n_events(self) -> int:
        """API calls + GPU ops (the unit of the run-level analyses' sizes)."""
        return int(self.api_start_ns.size) + self.n_gpu

    def devices(self) -> list[int]:
        return sorted(int(d) for d in np.unique(self.gpu_device))

    def api_tops(self) -> np.ndarray:
        """Per API call, the index of its top-level ancestor on its thread (itself when
        top-level). Computed once and kept in ``api_top`` (readers call this when they
        finish; a timeline built by hand gets it on first use)."""
        if self.api_top.size != self.api_start_ns.size:
            self.api_top = top_level(self.api_start_ns, self.api_end_ns, self.api_tid)
        return self.api_top

    def skip(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n

    # ---- save / load (the timeline is a value) -----------------------------------------
    _ARRAYS = tuple((
        "gpu_start_ns gpu_end_ns gpu_device gpu_stream gpu_kind gpu_name gpu_corr "
        "api_start_ns api_end_ns api_tid api_name api_corr api_top "
        "ann_start_ns ann_end_ns ann_tid ann_name "
        "gsync_start_ns gsync_end_ns gsync_kind gsync_device gsync_stream gsync_corr "
        "gsync_wait_stream gsync_wait_corr step_start_ns step_end_ns step_num "
        "comm_start_ns comm_end_ns comm_tid comm_kind comm_peer comm_group comm_seq comm_name "
        "comm_src"
    ).split())
    _DTYPES: ClassVar[Mapping[str, Any]] = MappingProxyType({
        "gpu_kind": np.int8, "gsync_kind": np.int8, "gpu_name": np.int32, "api_name": np.int32,
        "ann_name": np.int32, "comm_kind": np.int8, "comm_group": np.int32,
        "comm_name": np.int32, "comm_src": np.int8})

    def save(self, path: str | Path | BinaryIO, *, compress: bool = True) -> None:
        """Write the timeline as a numpy ``.npz`` (arrays) with a JSON header; no pickle.

        ``path`` may be an open binary file; ``compress=False`` stores the arrays as they
        are (the per-rank cache: loading then costs a copy, no inflate)."""
        header = {
            "rank": self.rank, "source": self.source, "files": self.files,
            "rank_rule": self.rank_rule, "names": self.names, "warnings": self.warnings,
            "skipped": self.skipped, "metadata": self.metadata,
            "has_gpu_sync_records": self.has_gpu_sync_records, "steps_rule": self.steps_rule,
        }
        arrays = {k: getattr(self, k) for k in self._ARRAYS}
        header_arr = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        write = np.savez_compressed if compress else np.savez
        if not isinstance(path, (str, Path)):
            write(path, __header__=header_arr, **arrays)
            return
        write_atomic(path, lambda fh: write(fh, __header__=header_arr, **arrays))

    @classmethod
    def load(cls, path: str | Path | BinaryIO) -> Timeline:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(bytes(z["__header__"]).decode())
            # files saved before a table existed load with that table empty
            arrays = {k: z[k] for k in cls._ARRAYS if k in z.files}
        tl = cls(**header, **arrays)
        tl.api_tops()  # saved before the nesting column existed: computed now
        return tl


def top_level(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Per call, the index of its top-level ancestor on its thread (itself if top-level).

    A call is nested when it starts before, and ends no later than, the furthest end of the
    calls that started before it on its thread (ties in start: the longer one is the outer).
    A call that only overlaps an earlier one (starts inside, ends after) is top-level.
    O(n log n): one sort per thread group, no per-call Python."""
    top = np.arange(start.size)
    for _, idx in groups(tid):
        idx = idx[np.lexsort((-end[idx], start[idx]))]
        s, e = start[idx], end[idx]
        reach = np.maximum.accumulate(e)
        nested = np.zeros(idx.size, dtype=bool)
        nested[1:] = (s[1:] < reach[:-1]) & (e[1:] <= reach[:-1])
        pos = np.where(~nested, np.arange(idx.size), -1)
        last_top = np.maximum.accumulate(pos)
        top[idx] = idx[last_top]
    return top


def launch_calls(tl: Timeline, memo: Memo | None = None) -> np.ndarray:
    """Per GPU op, the index of the host API call that launched it (same correlation id);
    -1 when the trace has none. ``memo``: computed once per timeline and correlation
    columns while the caller keeps it (then read-only)."""
    if memo is None:
        return _launch_calls(tl)
    return memo.get("launch calls", (tl, tl.api_corr, tl.gpu_corr),
                    lambda: read_only(_launch_calls(tl)))


def _launch_calls(tl: Timeline) -> np.ndarray:
    out = np.full(tl.n_gpu, -1, dtype=I64)
    if tl.api_corr.size and tl.gpu_corr.size:
        order = np.argsort(tl.api_corr, kind="stable")
        sc = tl.api_corr[order]
        pos = np.minimum(np.searchsorted(sc, tl.gpu_corr), sc.size - 1)
        ok = (sc[pos] == tl.gpu_corr) & (tl.gpu_corr >= 0)
        del sc
        out[ok] = order[pos[ok]]
    return out


def launch_tops(tl: Timeline, memo: Memo | None = None) -> np.ndarray:
    """Per GPU op, the top-level host call whose tree launched it (:func:`launch_calls`
    through the nesting column: a kernel of a ``cuLaunchKernel`` inside ``cudaLaunchKernel``
    was launched when the outer call began); -1 when the trace has none."""
    calls = launch_calls(tl, memo)
    if tl.api_start_ns.size == 0:
        return calls
    return np.where(calls >= 0, tl.api_tops()[np.maximum(calls, 0)], -1)


def launch_times(tl: Timeline, calls: np.ndarray | None = None) -> np.ndarray:
    """Per GPU op, the start of the host call that launched it (its own start if unknown).

    ``calls``: :func:`launch_calls` of ``tl`` when the caller has it already.
    """
    calls = launch_calls(tl) if calls is None else calls
    return at_or(tl.api_start_ns, calls, tl.gpu_start_ns)


def groups(keys: np.ndarray, rows: np.ndarray | None = None) -> list[tuple[int, np.ndarray]]:
    """``(key, its rows)`` per distinct ``keys[rows]`` value, ascending; each group's rows in
    the order given (default: all rows, ascending). One stable sort, O(n log n) however many
    keys: a mask per key (``keys == k`` for each of ``np.unique(keys)``) is O(keys x n), and a
    trace may hold tens of thousands of threads or API names."""
    rows = np.arange(keys.size) if rows is None else rows
    if rows.size == 0:
        return []
    k = keys[rows]
    o = np.argsort(k, kind="stable")
    ks, rs = k[o], rows[o]
    bounds = [0, *(np.flatnonzero(ks[1:] != ks[:-1]) + 1).tolist(), int(ks.size)]
    return [(int(ks[a]), rs[a:b]) for a, b in pairwise(bounds)]


def at_or(values: np.ndarray, idx: np.ndarray, fill: np.ndarray | int) -> np.ndarray:
    """``values[idx]`` where ``idx >= 0``, else ``fill`` (an array like ``idx``, or one
    value); ``values`` may be empty (then every ``idx`` is -1: a rank without host calls)."""
    linked = idx >= 0
    if not linked.any():
        return np.broadcast_to(np.asarray(fill, dtype=values.dtype), idx.shape).copy()
    return np.where(linked, values[np.maximum(idx, 0)], fill)


class SymbolTable:
    """Strings stored once: ``sym(s)`` gives ``s``'s index into ``names``."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._ids: dict[str, int] = {}

    def sym(self, s: str) -> int:
        i = self._ids.get(s)
        if i is None:
            i = self._ids[s] = len(self.names)
            self.names.append(s)
        return i


class TimelineBuilder(SymbolTable):
    """Accumulates rows in Python lists and freezes them into a :class:`Timeline`.

    Readers that produce rows one at a time use this; readers that already hold columns
    (SQL results) fill a Timeline directly.
    """

    def __init__(self) -> None:
        super().__init__()
        self.cols: dict[str, list[int]] = {k: [] for k in Timeline._ARRAYS}

    def gpu(self, start: int, end: int, device: int, stream: int, kind: int, name: str,
            corr: int) -> None:
        c = self.cols
        c["gpu_start_ns"].append(start)
        c["gpu_end_ns"].append(end)
        c["gpu_device"].append(device)
        c["gpu_stream"].append(stream)
        c["gpu_kind"].append(kind)
        c["gpu_name"].append(self.sym(name))
        c["gpu_corr"].append(corr)

    def api(self, start: int, end: int, tid: int, name: str, corr: int) -> None:
        c = self.cols
        c["api_start_ns"].append(start)
        c["api_end_ns"].append(end)
        c["api_tid"].append(tid)
        c["api_name"].append(self.sym(name))
        c["api_corr"].append(corr)

    def ann(self, start: int, end: int, tid: int, name: str) -> None:
        c = self.cols
        c["ann_start_ns"].append(start)
        c["ann_end_ns"].append(end)
        c["ann_tid"].append(tid)
        c["ann_name"].append(self.sym(name))

    def gsync(self, start: int, end: int, kind: int, device: int, stream: int, corr: int,
              wait_stream: int = -1, wait_corr: int = -1) -> None:
        c = self.cols
        c["gsync_start_ns"].append(start)
        c["gsync_end_ns"].append(end)
        c["gsync_kind"].append(kind)
        c["gsync_device"].append(device)
        c["gsync_stream"].append(stream)
        c["gsync_corr"].append(corr)
        c["gsync_wait_stream"].append(wait_stream)
        c["gsync_wait_corr"].append(wait_corr)

    def step(self, start: int, end: int, num: int) -> None:
        c = self.cols
        c["step_start_ns"].append(start)
        c["step_end_ns"].append(end)
        c["step_num"].append(num)

    def comm(self, start: int, end: int, tid: int, kind: int, peer: int, group: str | None,
             seq: int, name: str, src: int) -> None:
        """One communication-op row; ``group``: the global ranks as ``"0,1"`` or None."""
        c = self.cols
        c["comm_start_ns"].append(start)
        c["comm_end_ns"].append(end)
        c["comm_tid"].append(tid)
        c["comm_kind"].append(kind)
        c["comm_peer"].append(peer)
        c["comm_group"].append(-1 if group is None else self.sym(group))
        c["comm_seq"].append(seq)
        c["comm_name"].append(self.sym(name))
        c["comm_src"].append(src)

    def build(self, **meta: Any) -> Timeline:
        dtypes = Timeline._DTYPES
        arrays: dict[str, Any] = {k: np.asarray(v, dtype=dtypes.get(k, I64))  # column fields
                                  for k, v in self.cols.items()}
        return Timeline(names=self.names, **arrays, **meta)
