"""The attribution every stall report needs: each GPU idle gap of a rank charged to one cause
(the rules: ``stalls.rank``'s docstring), the devices' GPU time and idle by cause, and the
step time. Brief analyses (the what-if's replays) stop here; ``stalls.detail`` adds the rest.
Times int64 ns; the devices' figures in us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline, groups, launch_times, launch_tops
from profplug.analyzers.stalls.callmatch import SortedCalls
from profplug.analyzers.stalls.gaps import (
    C_DEVICE,
    C_EVENT,
    C_HOST,
    C_OTHER,
    CAUSES,
    DeviceIntervals,
    Gaps,
    device_intervals,
)
from profplug.analyzers.stalls.per_step import StepSpans, StepStats, step_time
from profplug.analyzers.stalls.result import DeviceStalls, GpuTime, us

CLOSING_REASON = "device sync after the last step (profiler closing its window)"
MAX_DEVICES = 4096  # distinct GPU device ids per rank: far beyond any node


@dataclass
class SyncCalls:
    """The rank's host-blocking calls: top-level calls whose sync kind (``api_kind``) is
    device or event, in timeline order; ``Gaps.call`` indexes them. ``row``: their rows in
    the timeline's ``api_*`` arrays; times in ns; ``api``: their API names."""

    row: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    kind: np.ndarray
    api: list[str]

    @classmethod
    def of(cls, tl: Timeline, api_kind: np.ndarray) -> SyncCalls:
        row = np.nonzero((api_kind == classify.DEVICE) | (api_kind == classify.EVENT))[0]
        return cls(row, tl.api_start_ns[row], tl.api_end_ns[row], api_kind[row],
                   [tl.names[n] for n in tl.api_name[row].tolist()])


class CauseRule:
    """Charges gaps by where their start falls (ns, within ``tol``): a device-wide sync,
    else an event sync, else (the host recorded, not blocked) host-bound; ``other`` where a
    reason says why not (a sync closing the profiler's window, no host trace there)."""

    def __init__(self, tl: Timeline, calls: SyncCalls, tol: int) -> None:
        self.tol = tol
        # A device-wide sync that starts after the last step range ended is the profiler
        # closing its window (torch.profiler and profplug both synchronize there) or
        # end-of-loop code, not the steady state: its gaps are "other", with that reason.
        closing = np.zeros(calls.kind.size, dtype=bool)
        if tl.step_end_ns.size:
            closing = (calls.kind == classify.DEVICE) & (calls.start_ns > int(tl.step_end_ns.max()))
        self.dev_calls = np.nonzero((calls.kind == classify.DEVICE) & ~closing)[0]
        self.close_calls = np.nonzero(closing)[0]
        self.evt_calls = np.nonzero(calls.kind == classify.EVENT)[0]
        self.dev, self.evt, self.close = (  # each sorted once, not per device
            SortedCalls(calls.start_ns[ix], calls.end_ns[ix])
            for ix in (self.dev_calls, self.evt_calls, self.close_calls))
        self.host_lo = int(tl.api_start_ns.min()) if tl.api_start_ns.size else None
        self.host_hi = int(tl.api_end_ns.max()) if tl.api_end_ns.size else None

    def charge(self, gs: np.ndarray, reasons: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """Per gap start (ns): its cause (index into CAUSES) and its sync call (-1: none);
        ``reasons`` gets the count of each reason for ``other`` found here."""
        cause = np.full(gs.size, C_HOST, dtype=np.int8)
        call = np.full(gs.size, -1, dtype=np.int64)
        m_dev = self.dev.match(gs, self.tol)
        hit = m_dev >= 0
        cause[hit], call[hit] = C_DEVICE, self.dev_calls[m_dev[hit]]
        if self.evt_calls.size:
            m_evt = self.evt.match(gs, self.tol)
            hit2 = (~hit) & (m_evt >= 0)
            cause[hit2], call[hit2] = C_EVENT, self.evt_calls[m_evt[hit2]]
        if self.close_calls.size:
            hit3 = (cause == C_HOST) & (self.close.match(gs, self.tol) >= 0)
            self._other(cause, hit3, CLOSING_REASON, reasons)
        rest = cause == C_HOST
        if self.host_lo is None or self.host_hi is None:
            self._other(cause, rest, "no host API calls in the trace", reasons)
        else:
            outside = rest & ((gs < self.host_lo - self.tol) | (gs > self.host_hi + self.tol))
            self._other(cause, outside, "gap outside the host trace's time span", reasons)
        return cause, call

    @staticmethod
    def _other(cause: np.ndarray, where: np.ndarray, reason: str,
               reasons: dict[str, int]) -> None:
        """``where``'s gaps charged to ``other``; their count added to ``reasons[reason]``
        (which sums over the rank's devices)."""
        cause[where] = C_OTHER
        if where.any():
            reasons[reason] = reasons.get(reason, 0) + int(where.sum())


def split_at_return(gs: np.ndarray, ge: np.ndarray, cause: np.ndarray, call: np.ndarray,
                    blocked_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The idle charged to a sync call is at most the time the call blocked the host
    (``blocked_ns``, per call): a call's gaps (those starting inside it) that sum to more,
    a gap that went on long after the call returned, are each cut at their share of it,
    and the rest of each is the host's (``host_bound``: the GPU waits for a launch). So
    the report's sync idle and the what-if's direct cost are one figure (the what-if's cap,
    ``whatif.step_figures.direct_ns``, is the same rule). Gaps stay in time order."""
    charged = np.nonzero(call >= 0)[0]
    if charged.size == 0:
        return gs, ge, cause, call
    c = call[charged]
    dur = ge[charged] - gs[charged]
    total = np.bincount(c, dur, minlength=blocked_ns.size).astype(np.float64)
    over = total > blocked_ns
    if not over[c].any():
        return gs, ge, cause, call
    scale = np.ones(blocked_ns.size)
    scale[over] = np.maximum(blocked_ns[over], 0) / total[over]
    keep = np.floor(dur * scale[c]).astype(np.int64)
    cut = keep < dur
    split = charged[cut]
    at = gs[split] + keep[cut]
    new_end = ge.copy()
    new_end[split] = at
    pos = split + 1  # each rest right after its gap
    return (np.insert(gs, pos, at), np.insert(new_end, pos, ge[split]),
            np.insert(cause, pos, np.int8(C_HOST)), np.insert(call, pos, -1))


def _sums(cause: np.ndarray, dur: np.ndarray, total: int | None = None) -> list[int]:
    """Per cause, the sum of the gaps' ``dur`` (ns, exact): one bincount, exact while the
    total is below 2^53 ns; ``total``: that sum, of positive gaps (a device's idle), if known."""
    if dur.size == 0 or (int(dur.sum()) >= 2 ** 53 or int(dur.min()) < 0 if total is None
                         else total >= 2 ** 53):
        return [int(dur[cause == k].sum()) for k in range(len(CAUSES))]
    return [int(x) for x in np.bincount(cause, dur, minlength=len(CAUSES))[:len(CAUSES)]]


def by_device(tl: Timeline) -> list[tuple[int, Any]]:
    """Per GPU device id: the selection of its ops in ``tl.gpu_*`` (one device, the usual: a
    slice, views and no copies; several: one sort, not a mask per device)."""
    one = tl.gpu_device.size and tl.gpu_device.min() == tl.gpu_device.max()
    out = [(int(tl.gpu_device[0]), slice(None))] if one else groups(tl.gpu_device)
    if len(out) > MAX_DEVICES:  # each device costs a pass of its own: refused before them
        raise TraceError(f"{', '.join(tl.files)}: {len(out):,} distinct GPU device ids on "
                         f"rank {tl.rank} (more than {MAX_DEVICES:,}): not a trace of real GPUs")
    return out


GapColumns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _joined(parts: list[GapColumns]) -> Gaps:
    """The devices' gap columns (start/end ns, device, cause, call) as one Gaps (one device,
    the usual: its arrays, no copy)."""
    if len(parts) == 1:
        return Gaps(*parts[0])
    if parts:
        start, end, device, cause, call = (np.concatenate([p[i] for p in parts])
                                           for i in range(5))
        return Gaps(start, end, device, cause, call)
    z = np.zeros(0, dtype=np.int64)
    return Gaps(z, z, z, z.astype(np.int8), z)


@dataclass
class Attribution:
    """A rank's gaps charged to their causes, and what every report reads of them.
    ``devices``: per device (in ``devices_sel``' order) its GPU time, every busy ns counted
    as compute (``stalls.detail`` splits off NCCL time), and idle by cause (us);
    ``intervals``: each device's busy time and gaps; ``devices_sel``: :func:`by_device`;
    ``other_reasons``: count of gaps per reason for ``other``; ``api_kind``: per API call its
    top-level sync kind; ``steps``, ``spans``: ``per_step.step_time``'s."""

    devices: list[DeviceStalls]
    intervals: dict[int, DeviceIntervals]
    devices_sel: list[tuple[int, Any]]
    gaps: Gaps
    other_reasons: dict[str, int]
    api_kind: np.ndarray
    calls: SyncCalls
    steps: StepStats | None
    spans: StepSpans | None


def attribute(tl: Timeline, tolerance_ns: int, *, api_kind: np.ndarray | None = None,
              launch: np.ndarray | None = None, memo: Memo | None = None) -> Attribution:
    """Charge every idle gap of ``tl`` (``tolerance_ns``: the host/GPU clock slack, ns).
    ``api_kind`` (``classify.call_kinds``) and ``launch`` (the ops' launch times,
    ``per_step.step_spans``): when the caller knows them (the what-if's replays); else
    through ``memo`` when given (the caller's, ``core.memo``)."""
    api_kind = classify.call_kinds(tl.names, tl.api_name, tl.api_tops(), memo) \
        if api_kind is None else api_kind
    if launch is None and memo is not None:
        launch = launch_times(tl, launch_tops(tl, memo))
    calls = SyncCalls.of(tl, api_kind)
    rule = CauseRule(tl, calls, int(tolerance_ns))
    sel = by_device(tl)
    devices: list[DeviceStalls] = []
    intervals: dict[int, DeviceIntervals] = {}
    parts: list[GapColumns] = []
    reasons: dict[str, int] = {}
    for dev, ops in sel:
        iv = intervals[dev] = device_intervals(tl.gpu_start_ns[ops], tl.gpu_end_ns[ops])
        gs, ge = iv.gap_start_ns, iv.gap_end_ns
        cause, call = rule.charge(gs, reasons)
        n_gaps = int(gs.size)
        gs, ge, cause, call = split_at_return(gs, ge, cause, call,
                                              calls.end_ns - calls.start_ns)
        sums = _sums(cause, ge - gs, iv.window_ns - iv.busy_ns)  # the gaps' total: the idle
        devices.append(DeviceStalls(device=dev, gpu=GpuTime.of(iv),
                                    idle_by_cause_us={c: us(v) for c, v in zip(CAUSES, sums,
                                                                               strict=True)},
                                    n_gaps=n_gaps))
        parts.append((gs, ge, np.full(gs.size, dev, dtype=np.int64), cause, call))
    gaps = _joined(parts)
    del parts  # joined: the parts are not held through the rest (a worker's peak memory)
    steps, spans = step_time(tl, gaps, CAUSES, launch=launch)
    return Attribution(devices, intervals, sel, gaps, reasons, api_kind, calls, steps, spans)
