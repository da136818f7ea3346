"""A rank's process in the merged trace, and the recorded tracks of a Timeline in it: its GPU
streams (kernels, copies, sets) and its host threads (CUDA API calls, annotations).

A :class:`Proc` puts a rank's own clock on the run's axis (``offset_ns``: the cross-rank
analysis's clock alignment; ``origin_ns``: the run's first GPU op, aligned) and keeps only
what overlaps its window (``lo_ns``..``hi_ns`` on the rank's clock; None: everything). Its
threads get small ids in the order they are first drawn, named by metadata events: profplug's
own tracks first, then the GPU streams, then the host threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from profplug.analyzers.core.timeline import KIND_NAMES, Timeline, groups
from profplug.analyzers.render.chrometrace.writer import TraceWriter, names_of

# thread sort keys: profplug's tracks, then GPU streams, then host threads
SORT_OWN, SORT_GPU, SORT_HOST = 0, 1000, 100_000


@dataclass
class Proc:
    """One process of the file: a rank as recorded, or as the what-if predicts it."""

    w: TraceWriter
    pid: int
    offset_ns: int
    origin_ns: int
    lo_ns: int | None = None
    hi_ns: int | None = None
    tids: dict[tuple[object, ...], int] = field(default_factory=dict)

    def tid(self, key: tuple[object, ...], name: str, sort: int) -> int:
        """The thread of ``key``, named (and sorted by ``sort``) when first asked for."""
        t = self.tids.get(key)
        if t is None:
            t = self.tids[key] = len(self.tids) + 1
            self.w.thread(self.pid, t, name, sort)
        return t

    def inside(self, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Which of the intervals [s, e] (rank clock) overlap the window."""
        keep = np.ones(s.size, dtype=bool)
        if self.lo_ns is not None:
            keep &= e >= self.lo_ns
        if self.hi_ns is not None:
            keep &= s <= self.hi_ns
        return keep

    def within(self, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Which of the intervals [s, e] (rank clock) the window holds whole."""
        keep = np.ones(s.size, dtype=bool)
        if self.lo_ns is not None:
            keep &= s >= self.lo_ns
        if self.hi_ns is not None:
            keep &= e <= self.hi_ns
        return keep

    def corr(self, c: np.ndarray) -> np.ndarray:
        """Correlation ids unique in the file: the trace's own id (< 2^32) plus the pid
        times 2^32, so a reader that pairs calls with GPU ops by id (Kineto's, Holistic
        Trace Analysis) pairs them within one process; -1 (none) stays."""
        return np.where(c >= 0, c.astype(np.int64) + (self.pid << 32), -1)

    def has(self, t_ns: int) -> bool:
        """Whether the rank-clock time ``t_ns`` is inside the window."""
        return (self.lo_ns is None or t_ns >= self.lo_ns) and \
            (self.hi_ns is None or t_ns <= self.hi_ns)

    def at_us(self, t_ns: int) -> float:
        """One rank-clock time as us on the run's axis."""
        return (t_ns + self.offset_ns - self.origin_ns) / 1000.0

    def rel(self, t_ns: np.ndarray) -> np.ndarray:
        """Rank-clock ns as ns on the run's axis (since its origin)."""
        return t_ns.astype(np.int64) + (self.offset_ns - self.origin_ns)

    def draw(self, key: tuple[object, ...], name: str, sort: int, cat: str, s: np.ndarray,
             e: np.ndarray, names: list[str], args: list[str] | None = None,
             cname: str | None = None, ints: tuple[str, np.ndarray] | None = None) -> None:
        """Slices [s, e] (rank clock, ns) on the thread of ``key``."""
        if s.size:
            self.w.slices(self.pid, self.tid(key, name, sort), cat, self.rel(s),
                          (e - s).astype(np.int64), names, args, cname, ints)


def gpu_key(dev: int, stream: int) -> tuple[object, ...]:
    return ("gpu", int(dev), int(stream))


def draw_gpu(p: Proc, tl: Timeline) -> None:
    """Every GPU op in the window, one thread per (device, stream); args as Kineto's
    (device, stream, correlation: :meth:`Proc.corr`)."""
    keep = p.inside(tl.gpu_start_ns, tl.gpu_end_ns)
    dev_stream = tl.gpu_device.astype(np.int64) * (1 << 32) + tl.gpu_stream.astype(np.int64)
    for _, idx in groups(dev_stream):
        idx = idx[keep[idx]]
        if idx.size == 0:
            continue
        dev, stream = int(tl.gpu_device[idx[0]]), int(tl.gpu_stream[idx[0]])
        idx = idx[np.argsort(tl.gpu_start_ns[idx], kind="stable")]
        head = f'{{"device":{dev},"stream":{stream},"correlation":'
        for k, kind in enumerate(KIND_NAMES):
            sel = idx[tl.gpu_kind[idx] == k]
            if sel.size:
                p.draw(gpu_key(dev, stream), f"gpu {dev} stream {stream}",
                       SORT_GPU + len(p.tids), kind, tl.gpu_start_ns[sel], tl.gpu_end_ns[sel],
                       names_of(tl.gpu_name[sel], tl.names),
                       ints=(head, p.corr(tl.gpu_corr[sel])))


def draw_host(p: Proc, tl: Timeline, annotations: bool = True) -> None:
    """Every CUDA API call (``cuda_runtime``, with its correlation) and, with
    ``annotations``, every host range (``user_annotation``) in the window, one thread per host
    thread of the trace."""
    tables: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]
    tables = [("cuda_runtime", tl.api_start_ns, tl.api_end_ns, tl.api_tid, tl.api_name,
               tl.api_corr)]
    if annotations:
        tables.append(("user_annotation", tl.ann_start_ns, tl.ann_end_ns, tl.ann_tid,
                       tl.ann_name, None))
    for cat, s, e, tid, name, corr in tables:
        keep = p.inside(s, e)
        for os_tid, idx in groups(tid):
            idx = idx[keep[idx]]
            if idx.size == 0:
                continue
            ints = None if corr is None else ('{"correlation":', p.corr(corr[idx]))
            p.draw(("host", int(os_tid)), f"host thread {int(os_tid)}",
                   SORT_HOST + len(p.tids), cat, s[idx], e[idx], names_of(name[idx], tl.names),
                   ints=ints)


def window_of(tl: Timeline) -> tuple[int, int] | None:
    """The GPU window of a timeline (first op's start, last op's end; rank clock), None
    without GPU work."""
    if tl.n_gpu == 0:
        return None
    return int(tl.gpu_start_ns.min()), int(tl.gpu_end_ns.max())
