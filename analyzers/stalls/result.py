"""What the stall analysis of one rank returns: :class:`RankResult` (``*_us`` in us,
``*_ns`` in int64 ns), its devices' :class:`GpuTime`, its call sites' :class:`CallsiteStat`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
from profplug.analyzers.stalls.gaps import CAUSES, DeviceIntervals, Gaps, Spans
from profplug.analyzers.stalls.per_step import StepStats
from profplug.analyzers.stalls.streamwait import StreamWaitStat
from profplug.analyzers.stalls.syncstats import SyncStat


def us(ns: float | int | np.integer) -> float:
    """ns as us, rounded to the ns (3 decimals), as every ``*_us`` figure is reported."""
    return round(float(ns) / 1000.0, 3)


@dataclass
class GpuTime:
    """How a GPU window splits, in us: busy = compute + comm, idle = window - busy."""

    window_us: float
    busy_us: float
    compute_us: float
    comm_us: float
    idle_us: float

    @classmethod
    def of(cls, iv: DeviceIntervals, comm_ns: int = 0) -> GpuTime:
        """A device's split from its intervals and its NCCL time (ns; 0: none known, every
        busy ns counted as compute)."""
        return cls(window_us=us(iv.window_ns), busy_us=us(iv.busy_ns),
                   compute_us=us(iv.busy_ns - comm_ns), comm_us=us(comm_ns),
                   idle_us=us(iv.window_ns - iv.busy_ns))


GPU_TIME_FIELDS = tuple(f.name for f in fields(GpuTime))


def flat_dict(obj: Any) -> dict[str, Any]:
    """``asdict(obj)`` with its GpuTime field's numbers in place of the field (the JSON)."""
    d = asdict(obj)
    out: dict[str, Any] = {}
    for f in fields(obj):
        if isinstance(getattr(obj, f.name), GpuTime):
            out.update(d[f.name])
        else:
            out[f.name] = d[f.name]
    return out


@dataclass
class DeviceStalls:
    device: int
    gpu: GpuTime
    idle_by_cause_us: dict[str, float]
    n_gaps: int


@dataclass
class CallsiteStat:
    callsite: str
    api: str
    count: int
    idle_caused_us: float
    host_blocked_us: float
    idle_per_step_us: float | None


@dataclass
class RankResult:
    """One rank's whole result (``analyze_rank``): its devices' GPU time and idle by cause,
    the syncs and call sites, the steps and the idle gaps; times in us, gaps in ns."""

    rank: int
    source: str
    files: list[str]
    rank_rule: str
    steps_rule: str | None  # the step rule that found the steps (steprule), None: no steps
    devices: list[DeviceStalls]
    syncs: list[SyncStat]
    callsites: list[CallsiteStat]
    stream_waits: list[StreamWaitStat]
    steps: StepStats | None
    other_reasons: dict[str, int]
    warnings: list[str]
    skipped: dict[str, int]
    gaps: Gaps
    # Per sync call (the host-blocking calls Gaps.call indexes): its API name, its call site
    # and its row in the timeline's api_* arrays.
    call_api: list[str] = field(default_factory=list)
    call_site: list[str] = field(default_factory=list)
    call_row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    windows_ns: dict[int, tuple[int, int]] = field(default_factory=dict)  # device: GPU window
    step_starts_ns: np.ndarray = field(  # GPU start (first op) of each complete step
        default_factory=lambda: np.zeros(0, dtype=np.int64))
    callsites_failed: str | None = None  # the call sites' failure (a warning), None: none
    step_ends_ns: np.ndarray = field(  # GPU end of each complete step's span (steps.py)
        default_factory=lambda: np.zeros(0, dtype=np.int64))
    step_last_ns: np.ndarray = field(  # end of the last-ending op each complete step launched
        default_factory=lambda: np.zeros(0, dtype=np.int64))
    comm: Spans = field(default_factory=Spans.empty)  # NCCL time (>= 1 NCCL kernel running)

    def total(self, name: str) -> float:
        """One of ``GPU_TIME_FIELDS`` summed over the rank's devices (us, not rounded)."""
        return float(sum(getattr(d.gpu, name) for d in self.devices))

    def gpu_time(self) -> GpuTime:
        """The rank's GPU time over all its devices, rounded to ns as reported (us)."""
        return GpuTime(*(round(self.total(f), 3) for f in GPU_TIME_FIELDS))

    def idle_by_cause_us(self) -> dict[str, float]:
        return {c: float(sum(d.idle_by_cause_us[c] for d in self.devices)) for c in CAUSES}

    @property
    def stream_wait_us(self) -> float:
        return float(sum(s.stall_us for s in self.stream_waits))

    @property
    def has_gpu_work(self) -> bool:
        return bool(self.devices)
