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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.errors import ProfplugError, TraceError
from profplug.analyzers.core.optional import isolated
from profplug.analyzers.core.timeline import Timeline, groups
from profplug.analyzers.stalls.callsites import enclosing
from profplug.analyzers.stalls.gaps import (
    C_DEVICE,
    C_EVENT,
    C_HOST,
    C_OTHER,
    CAUSES,
    DeviceIntervals,
    Gaps,
    Spans,
    device_intervals,
)
from profplug.analyzers.stalls.outliers import describe as describe_outliers
from profplug.analyzers.stalls.per_step import StepStats, center_by_key, step_stats_and_spans
from profplug.analyzers.stalls.rangequery import last_at_least
from profplug.analyzers.stalls.streamwait import StreamWaitStat, stream_waits
from profplug.analyzers.stalls.syncstats import SyncStat, sync_stats

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


@dataclass
class GpuTime:
    """How a GPU window splits, in us: busy = compute + comm, idle = window - busy."""

    window_us: float
    busy_us: float
    compute_us: float
    comm_us: float
    idle_us: float


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


def _us(ns: float | int | np.integer) -> float:
    return round(float(ns) / 1000.0, 3)


def _sums(cause: np.ndarray, dur: np.ndarray, total: int | None = None) -> list[int]:
    """Per cause, the sum of the gaps' ``dur`` (ns, exact): one bincount, exact while the
    total is below 2^53 ns; ``total``: that sum, of positive gaps (a device's idle), if known."""
    if dur.size == 0 or (int(dur.sum()) >= 2 ** 53 or int(dur.min()) < 0 if total is None
                         else total >= 2 ** 53):
        return [int(dur[cause == k].sum()) for k in range(len(CAUSES))]
    return [int(x) for x in np.bincount(cause, dur, minlength=len(CAUSES))[:len(CAUSES)]]


def _match_calls(gap_start: np.ndarray, c_start: np.ndarray, c_end: np.ndarray, tol: int
                 ) -> np.ndarray:
    """Per gap, the index of a call whose [start-tol, end+tol] holds the gap start, else -1.

    Among several, the latest-starting one. Calls need not be sorted.
    """
    return _Calls(c_start, c_end).match(gap_start, tol)


CLOSING_REASON = "device sync after the last step (profiler closing its window)"
MAX_DEVICES = 4096  # distinct GPU device ids per rank: far beyond any node


_NO_CALL = np.full(4096, -1, dtype=np.int64)  # "no call" for up to this many gaps (read only)
_NO_CALL.flags.writeable = False


class _Calls:
    """Calls sorted by start once, matched against the gaps of each device in turn."""

    def __init__(self, c_start: np.ndarray, c_end: np.ndarray) -> None:
        if c_start.size == 0:  # nothing to match (often: no event syncs, no closing sync)
            self.order = self.s = self.e = self.reach = c_start
            return
        self.order = np.argsort(c_start, kind="stable")
        self.s, self.e = c_start[self.order], c_end[self.order]
        self.reach = np.maximum.accumulate(self.e) if self.e.size else self.e

    def match(self, gap_start: np.ndarray, tol: int) -> np.ndarray:
        """As :func:`_match_calls`."""
        if self.s.size == 0 or gap_start.size == 0:
            return _NO_CALL[:gap_start.size] if gap_start.size <= _NO_CALL.size else \
                np.full(gap_start.size, -1, dtype=np.int64)
        out = np.full(gap_start.size, -1, dtype=np.int64)
        order, s, e, reach = self.order, self.s, self.e, self.reach
        i = s.searchsorted(gap_start + tol, side="right") - 1
        ok = i >= 0
        ii = np.maximum(i, 0)  # i >= -1
        lo = gap_start - tol  # x + tol >= gap start, as x >= gap start - tol (no overflow:
        covered = ok & (reach[ii] >= lo)  # times within +-2^62 ns)
        direct = covered & (e[ii] >= lo)
        out[direct] = order[ii[direct]]
        late = (covered & ~direct).nonzero()[0]  # an earlier, longer call holds it (rare)
        if late.size:  # the latest-starting of those: O(log n) each, not a walk back
            k = last_at_least(e, ii[late], gap_start[late] - tol)
            out[late] = np.where(k >= 0, order[np.maximum(k, 0)], -1)
        return out


def analyze_rank(tl: Timeline, options: StallOptions | None = None, *, brief: bool = False,
                 api_kind: np.ndarray | None = None, launch: np.ndarray | None = None
                 ) -> RankResult:
    """Attribute every idle gap of one rank's timeline (see the module docstring); ``brief``:
    the GPU window and busy time, gaps and the step time only (no call sites, sync/stream-wait
    stats, outlier texts, NCCL time: ``comm`` empty and every busy ns counted as compute;
    the steps' means and lists left empty, ``steps.step_stats_and_spans``). ``api_kind``:
    the calls' top-level sync kinds (``classify.top_level_kinds``) and ``launch``: the ops'
    launch times (``steps.step_spans``), when the caller knows them (the what-if's replays
    of an analyzed timeline)."""
    opt = options or StallOptions()
    tol = int(opt.tolerance_ns)
    if api_kind is None:
        kinds = classify.kinds_for_symbols(tl.names)
        # top-level calls only (a nested call's time is its top-level call's): the kind of
        # a call is the strongest among itself and the calls nested in it (classify)
        api_kind = classify.top_level_kinds(
            kinds[tl.api_name] if tl.api_name.size else np.zeros(0, dtype=np.int8),
            tl.api_tops())
    comm_sym = None if brief else classify.comm_for_symbols(tl.names)
    sync_idx = np.nonzero((api_kind == classify.DEVICE) | (api_kind == classify.EVENT))[0]
    c_start, c_end = tl.api_start_ns[sync_idx], tl.api_end_ns[sync_idx]
    c_kind = api_kind[sync_idx]
    # A device-wide sync that starts after the last step range ended is the profiler closing
    # its window (torch.profiler and profplug both synchronize there) or end-of-loop code,
    # not the steady state: its gaps are "other", with that reason.
    closing = np.zeros(c_kind.size, dtype=bool)
    if tl.step_end_ns.size:
        closing = (c_kind == classify.DEVICE) & (c_start > int(tl.step_end_ns.max()))
    dev_calls = np.nonzero((c_kind == classify.DEVICE) & ~closing)[0]
    close_calls = np.nonzero(closing)[0]
    evt_calls = np.nonzero(c_kind == classify.EVENT)[0]
    host_lo = int(tl.api_start_ns.min()) if tl.api_start_ns.size else None
    host_hi = int(tl.api_end_ns.max()) if tl.api_end_ns.size else None

    devices: list[DeviceStalls] = []
    per_dev_intervals: dict[int, DeviceIntervals] = {}
    g_parts: list[tuple[np.ndarray, ...]] = []
    other_reasons: dict[str, int] = {}
    comm_parts: list[tuple[int, np.ndarray, np.ndarray]] = []  # per device: NCCL spans
    dev_c = _Calls(c_start[dev_calls], c_end[dev_calls])  # sorted once, not per device
    evt_c = _Calls(c_start[evt_calls], c_end[evt_calls])
    close_c = _Calls(c_start[close_calls], c_end[close_calls])
    one = tl.gpu_device.size and tl.gpu_device.min() == tl.gpu_device.max()
    # one sort: linear, not a mask per device; one device (the usual): views, no copies
    by_dev = [(int(tl.gpu_device[0]), slice(None))] if one else groups(tl.gpu_device)
    if len(by_dev) > MAX_DEVICES:  # ~0.3 ms per device: 160k ids took minutes
        raise TraceError(f"{', '.join(tl.files)}: {len(by_dev):,} distinct GPU device ids on "
                         f"rank {tl.rank} (more than {MAX_DEVICES:,}): not a trace of real GPUs")
    for dev, sel in by_dev:
        s, e = tl.gpu_start_ns[sel], tl.gpu_end_ns[sel]
        iv = device_intervals(s, e)
        per_dev_intervals[dev] = iv
        comm_ns = 0
        if comm_sym is not None:
            is_comm = comm_sym[tl.gpu_name[sel]]
            comm_iv = device_intervals(s[is_comm], e[is_comm])  # empty: no NCCL time
            comm_parts.append((dev, *comm_iv.busy_spans()))
            comm_ns = comm_iv.busy_ns
        gs, ge = iv.gap_start_ns, iv.gap_end_ns
        cause = np.full(gs.size, C_HOST, dtype=np.int8)
        call = np.full(gs.size, -1, dtype=np.int64)
        m_dev = dev_c.match(gs, tol)
        hit = m_dev >= 0
        cause[hit], call[hit] = C_DEVICE, dev_calls[m_dev[hit]]
        if evt_calls.size:
            m_evt = evt_c.match(gs, tol)
            hit2 = (~hit) & (m_evt >= 0)
            cause[hit2], call[hit2] = C_EVENT, evt_calls[m_evt[hit2]]
        if close_calls.size:
            m_close = close_c.match(gs, tol)
            hit3 = (cause == C_HOST) & (m_close >= 0)
            cause[hit3] = C_OTHER
            if hit3.any():
                other_reasons[CLOSING_REASON] = int(hit3.sum())
        rest = cause == C_HOST
        if host_lo is None:
            cause[rest] = C_OTHER
            if rest.any():
                other_reasons["no host API calls in the trace"] = int(rest.sum())
        else:
            outside = rest & ((gs < host_lo - tol) | (gs > host_hi + tol))
            cause[outside] = C_OTHER
            if outside.any():
                other_reasons["gap outside the host trace's time span"] = int(outside.sum())
        dur = ge - gs
        sums = _sums(cause, dur, iv.window_ns - iv.busy_ns)  # the gaps' total: the idle
        by_cause = {c: _us(v) for c, v in zip(CAUSES, sums, strict=True)}
        gpu = GpuTime(window_us=_us(iv.window_ns), busy_us=_us(iv.busy_ns),
                      compute_us=_us(iv.busy_ns - comm_ns), comm_us=_us(comm_ns),
                      idle_us=_us(iv.window_ns - iv.busy_ns))
        devices.append(DeviceStalls(device=dev, gpu=gpu, idle_by_cause_us=by_cause,
                                    n_gaps=int(gs.size)))
        g_parts.append((gs, ge, np.full(gs.size, dev, dtype=np.int64), cause, call))

    if len(g_parts) == 1:  # one device (the usual): its arrays as they are, not a copy
        gaps = Gaps(*g_parts[0])
    elif g_parts:
        gaps = Gaps(*(np.concatenate([p[i] for p in g_parts]) for i in range(5)))
    else:
        z = np.zeros(0, dtype=np.int64)
        gaps = Gaps(z, z, z, z.astype(np.int8), z)

    del g_parts  # joined: the parts are not held through the rest (a worker's peak memory)
    names = tl.names
    call_api = [names[n] for n in tl.api_name[sync_idx].tolist()]
    # call sites are optional: a failure leaves them out with one warning (isolate)
    sites, callsites_failed = (None, None) if brief else isolated(
        "call sites", enclosing, tl, c_start, c_end, tl.api_tid[sync_idx])
    call_site = sites if sites is not None else [""] * int(sync_idx.size)
    idle_per_call = np.zeros(sync_idx.size, dtype=np.int64)  # read by the full analysis only
    if not brief:
        charged = gaps.call >= 0
        np.add.at(idle_per_call, gaps.call[charged], (gaps.end_ns - gaps.start_ns)[charged])

    steps, sp = step_stats_and_spans(tl, gaps, CAUSES, launch=launch, brief=brief)
    z = np.zeros(0, dtype=np.int64)
    step_starts, step_ends, step_last = (sp.span_s, sp.span_e, sp.last_e) if sp else (z, z, z)
    if steps is not None and steps.outlier_steps and not brief:
        steps.outliers = describe_outliers(tl, steps, step_starts, step_ends, gaps, call_site,
                                           sync_idx)
    n_steps = steps.n_steps if steps and steps.n_steps else None
    syncs = [] if brief else sync_stats(tl, api_kind, call_api, c_start, c_end, c_kind,
                                         idle_per_call)
    callsites: list[CallsiteStat] = []
    if callsites_failed is None and not brief:
        stats, callsites_failed = isolated(
            "call sites", _callsites_per_step, call_api, call_site, c_start, c_end,
            idle_per_call, n_steps, steps, sp, gaps)
        callsites = stats or []
    waits = [] if brief else stream_waits(tl, per_dev_intervals)
    return RankResult(
        rank=tl.rank, source=tl.source, files=list(tl.files), rank_rule=tl.rank_rule,
        steps_rule=tl.steps_rule, devices=devices, syncs=syncs, callsites=callsites, stream_waits=waits, steps=steps,
        other_reasons=other_reasons, warnings=list(tl.warnings), skipped=dict(tl.skipped),
        gaps=gaps, call_api=call_api, call_site=call_site, call_row=sync_idx,
        windows_ns={d: (iv.window_start_ns, iv.window_end_ns)
                    for d, iv in per_dev_intervals.items()},
        step_starts_ns=step_starts, step_ends_ns=step_ends, step_last_ns=step_last,
        callsites_failed=callsites_failed, comm=Spans.join(comm_parts))


def _callsites_per_step(call_api: list[str], call_site: list[str], c_start: np.ndarray,
                        c_end: np.ndarray, idle_per_call: np.ndarray, n_steps: int | None,
                        steps: StepStats | None, sp: Any, gaps: Gaps) -> list[CallsiteStat]:
    """:func:`_callsite_stats`, each call site's idle per step as the median over the basis
    steps (``stepstats``) when the rank has steps."""
    callsites = _callsite_stats(call_api, call_site, c_start, c_end, idle_per_call, n_steps)
    if n_steps and sp is not None and callsites and steps is not None:  # per step: median
        site_ix = {(c.callsite, c.api): i for i, c in enumerate(callsites)}
        of_call = np.array([site_ix[(s, classify.base_name(a))]
                            for s, a in zip(call_site, call_api, strict=True)], dtype=np.int64)
        key = np.where(gaps.call >= 0, of_call[np.maximum(gaps.call, 0)], -1)
        med = center_by_key(sp.span_s, sp.span_e, gaps.start_ns, gaps.end_ns - gaps.start_ns,
                            key, len(callsites), steps.basis())
        for c, v in zip(callsites, med, strict=True):
            c.idle_per_step_us = round(float(v), 3)
    return callsites


def _callsite_stats(call_api: list[str], call_site: list[str], c_start: np.ndarray,
                    c_end: np.ndarray, idle_per_call: np.ndarray, n_steps: int | None
                    ) -> list[CallsiteStat]:
    agg: dict[tuple[str, str], list[int]] = {}
    for i, (api, site) in enumerate(zip(call_api, call_site, strict=True)):
        a = agg.setdefault((site, classify.base_name(api)), [0, 0, 0])
        a[0] += 1
        a[1] += int(idle_per_call[i])
        a[2] += int(c_end[i] - c_start[i])
    out = [CallsiteStat(site, api, n, _us(idle), _us(blk),
                        _us(idle / n_steps) if n_steps else None)
           for (site, api), (n, idle, blk) in agg.items()]
    out.sort(key=lambda c: (-c.idle_caused_us, -c.count, c.callsite))
    return out
