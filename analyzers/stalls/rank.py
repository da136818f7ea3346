"""Stall attribution: every GPU idle gap of a rank, charged to exactly one cause.

Definitions (times reported in microseconds, ``*_us``; computed in ns):

- GPU work: kernels, memcpys, memsets. comm = NCCL/RCCL kernels, compute = the rest.
- window: first GPU work start .. last GPU work end, per device.
- busy: union of GPU work; ``comm_us`` = time with >= 1 comm kernel running,
  ``compute_us`` = busy - comm. idle = window - busy; a gap = a maximal idle interval.
- cause of a gap, by where its start falls (within ``tolerance_ns``):
  ``device_sync`` if a host thread of the rank is inside a device-wide synchronize,
  else ``event_sync`` if inside a narrower host-blocking wait, else ``host_bound`` if the
  host was recorded but not blocked, else ``other`` (no host API activity recorded around
  the gap: the reason is kept). The causes add up to idle exactly.
- host calls: top-level calls only (``Timeline.api_tops``): a call nested in another on
  its thread (a driver call in a runtime call) is its top-level call's time, counted and
  charged once, there. A top-level call's sync kind is the strongest among itself and the
  calls nested in it (``classify.top_level_kinds``).

The analysis in two parts with their own modules: ``attribution`` (the gaps charged, the
devices' GPU time and idle by cause, the step time: what every report, brief or not, needs)
and ``detail`` (NCCL time, call sites, sync and call-site stats, stream waits, the steps'
host-range figures and outliers: what ``brief`` skips). ``result`` holds what they return.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.stalls.attribution import Attribution, attribute
from profplug.analyzers.stalls.detail import Detail, detail
from profplug.analyzers.stalls.gaps import Spans
from profplug.analyzers.stalls.result import (
    GPU_TIME_FIELDS,
    CallsiteStat,
    DeviceStalls,
    GpuTime,
    RankResult,
    flat_dict,
)

__all__ = ["GPU_TIME_FIELDS", "CallsiteStat", "DeviceStalls", "GpuTime", "RankResult",
           "StallOptions", "analyze_rank", "flat_dict", "rank_stalls"]

DEFAULT_TOLERANCE_NS = 2_000


@dataclass
class StallOptions:
    tolerance_ns: int = DEFAULT_TOLERANCE_NS  # clock slack between host and GPU timestamps

    def __post_init__(self) -> None:
        if self.tolerance_ns < 0:
            raise ProfplugError(f"the tolerance must be >= 0 us (got "
                                f"{self.tolerance_ns / 1000:g} us)")

    @classmethod
    def from_tolerance_us(cls, tolerance_us: float) -> StallOptions:
        """The options for a tolerance given in us (the CLI's ``--tolerance-us``, >= 0)."""
        if not 0 <= tolerance_us <= 3.6e9:  # also NaN; 1 hour at most: int64 ns stay far
            raise ProfplugError("--tolerance-us must be a number >= 0 and at most 3.6e9 (one "
                                f"hour; got {tolerance_us:g})")
        return cls(tolerance_ns=round(tolerance_us * 1000))


def analyze_rank(tl: Timeline, options: StallOptions | None = None, *, brief: bool = False,
                 api_kind: np.ndarray | None = None, launch: np.ndarray | None = None,
                 memo: Memo | None = None) -> RankResult:
    """Attribute every idle gap of one rank's timeline (see the module docstring). ``brief``:
    the attribution only (``stalls.attribution``: GPU window and busy time, gaps, the step
    time), without ``stalls.detail`` (no call sites, sync/stream-wait stats, outlier texts,
    NCCL time: ``comm`` empty and every busy ns counted as compute; the steps' means and
    host-range figures left empty). ``api_kind``: the calls' top-level sync kinds
    (``classify.call_kinds``) and ``launch``: the ops' launch times
    (``per_step.step_spans``), when the caller knows them (the what-if's replays of an
    analyzed timeline); ``memo``: the caller's (``core.memo``), for what its other analyses
    of ``tl`` ask too (the kinds, the launches)."""
    opt = options or StallOptions()
    att = attribute(tl, opt.tolerance_ns, api_kind=api_kind, launch=launch, memo=memo)
    return rank_stalls(tl, att, None if brief else detail(tl, att))


def rank_stalls(tl: Timeline, att: Attribution, more: Detail | None) -> RankResult:
    """The RankResult of ``tl`` from its attribution and, unless brief (None), its detail."""
    devices = att.devices
    if more is not None:  # NCCL time split off the busy time
        devices = [replace(d, gpu=GpuTime.of(att.intervals[d.device], more.comm_ns[d.device]))
                   for d in devices]
    sp = att.spans
    z = np.zeros(0, dtype=np.int64)
    return RankResult(
        rank=tl.rank, source=tl.source, files=list(tl.files), rank_rule=tl.rank_rule,
        steps_rule=tl.steps_rule, devices=devices,
        syncs=more.syncs if more else [], callsites=more.callsites if more else [],
        stream_waits=more.stream_waits if more else [],
        steps=more.steps if more else att.steps,
        other_reasons=att.other_reasons, warnings=list(tl.warnings), skipped=dict(tl.skipped),
        gaps=att.gaps, call_api=att.calls.api,
        call_site=more.call_site if more else [""] * int(att.calls.row.size),
        call_row=att.calls.row,
        windows_ns={d: (iv.window_start_ns, iv.window_end_ns) for d, iv in att.intervals.items()},
        step_starts_ns=sp.span_s if sp else z, step_ends_ns=sp.span_e if sp else z,
        step_last_ns=sp.last_e if sp else z,
        callsites_failed=more.callsites_failed if more else None,
        comm=more.comm if more else Spans.empty())
