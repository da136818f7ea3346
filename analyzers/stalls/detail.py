"""What the full stall report adds to the attribution (``stalls.attribution``), and brief
analyses skip: the NCCL time, the sync calls' call sites and their stats per API and per
call site, the stream waits, the steps' host-range figures and outlier texts. Times in us;
the NCCL spans in int64 ns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.optional import isolated
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.stalls.attribution import Attribution, SyncCalls
from profplug.analyzers.stalls.callsites import enclosing
from profplug.analyzers.stalls.gaps import CAUSES, Gaps, Spans, device_intervals
from profplug.analyzers.stalls.outliers import describe as describe_outliers
from profplug.analyzers.stalls.per_step import StepSpans, StepStats, center_by_key, step_detail
from profplug.analyzers.stalls.result import CallsiteStat, us
from profplug.analyzers.stalls.streamwait import StreamWaitStat, stream_waits
from profplug.analyzers.stalls.syncstats import SyncStat, sync_stats


@dataclass
class Detail:
    """``comm_ns``: per device, its NCCL time (ns; >= 1 NCCL kernel running), ``comm`` as
    spans; ``call_site``: per sync call (``SyncCalls``) its call site ("" when they failed:
    ``callsites_failed``, the warning); ``steps``: the attribution's, completed."""

    comm_ns: dict[int, int]
    comm: Spans
    call_site: list[str]
    callsites_failed: str | None
    syncs: list[SyncStat]
    callsites: list[CallsiteStat]
    stream_waits: list[StreamWaitStat]
    steps: StepStats | None


def nccl_time(tl: Timeline, att: Attribution) -> tuple[dict[int, int], Spans]:
    """Per device, the time (ns) with at least one NCCL kernel running, and as spans."""
    comm_sym = classify.comm_for_symbols(tl.names)
    comm_ns: dict[int, int] = {}
    parts: list[tuple[int, np.ndarray, np.ndarray]] = []
    for dev, ops in att.devices_sel:
        is_comm = comm_sym[tl.gpu_name[ops]]
        iv = device_intervals(tl.gpu_start_ns[ops][is_comm], tl.gpu_end_ns[ops][is_comm])
        parts.append((dev, *iv.busy_spans()))  # empty: no NCCL time
        comm_ns[dev] = iv.busy_ns
    return comm_ns, Spans.join(parts)


def idle_per_call(calls: SyncCalls, gaps: Gaps) -> np.ndarray:
    """Per sync call, the idle (ns) of the gaps charged to it."""
    out = np.zeros(calls.row.size, dtype=np.int64)
    charged = gaps.call >= 0
    np.add.at(out, gaps.call[charged], (gaps.end_ns - gaps.start_ns)[charged])
    return out


def detail(tl: Timeline, att: Attribution) -> Detail:
    """The full report's additions to ``att`` (an attribution of ``tl``)."""
    calls, gaps = att.calls, att.gaps
    comm_ns, comm = nccl_time(tl, att)
    # call sites are optional: a failure leaves them out with one warning (isolate)
    sites, failed = isolated("call sites", enclosing, tl, calls.start_ns, calls.end_ns,
                             tl.api_tid[calls.row])
    call_site = sites if sites is not None else [""] * int(calls.row.size)
    idle = idle_per_call(calls, gaps)
    steps, sp = att.steps, att.spans
    if steps is not None and sp is not None:
        steps = step_detail(steps, tl, gaps, sp, CAUSES)
        if steps.outlier_steps:
            steps.outliers = describe_outliers(tl, steps, sp.span_s, sp.span_e, gaps, call_site,
                                               calls.row)
    syncs = sync_stats(tl, att.api_kind, calls.api, calls.start_ns, calls.end_ns, calls.kind,
                       idle)
    callsites: list[CallsiteStat] = []
    if failed is None:
        stats, failed = isolated("call sites", _callsites_per_step, calls, call_site, idle,
                                 steps, sp, gaps)
        callsites = stats or []
    return Detail(comm_ns, comm, call_site, failed, syncs, callsites,
                  stream_waits(tl, att.intervals), steps)


def _callsites_per_step(calls: SyncCalls, call_site: list[str], idle: np.ndarray,
                        steps: StepStats | None, sp: StepSpans | None, gaps: Gaps
                        ) -> list[CallsiteStat]:
    """:func:`_callsite_stats`, each call site's idle per step as the median over the basis
    steps (``steps.stats``) when the rank has steps."""
    n_steps = steps.n_steps if steps and steps.n_steps else None
    callsites = _callsite_stats(calls, call_site, idle, n_steps)
    if n_steps and sp is not None and callsites and steps is not None:  # per step: median
        site_ix = {(c.callsite, c.api): i for i, c in enumerate(callsites)}
        of_call = np.array([site_ix[(s, classify.base_name(a))]
                            for s, a in zip(call_site, calls.api, strict=True)], dtype=np.int64)
        key = np.where(gaps.call >= 0, of_call[np.maximum(gaps.call, 0)], -1)
        med = center_by_key(sp.span_s, sp.span_e, gaps.start_ns, gaps.end_ns - gaps.start_ns,
                            key, len(callsites), steps.basis())
        for c, v in zip(callsites, med, strict=True):
            c.idle_per_step_us = round(float(v), 3)
    return callsites


def _callsite_stats(calls: SyncCalls, call_site: list[str], idle: np.ndarray,
                    n_steps: int | None) -> list[CallsiteStat]:
    """One row per (call site, API): its calls, the idle charged to them and the time they
    blocked the host (us), most idle first; the idle per step: the mean over ``n_steps``."""
    agg: dict[tuple[str, str], list[int]] = {}
    for i, (api, site) in enumerate(zip(calls.api, call_site, strict=True)):
        a = agg.setdefault((site, classify.base_name(api)), [0, 0, 0])
        a[0] += 1
        a[1] += int(idle[i])
        a[2] += int(calls.end_ns[i] - calls.start_ns[i])
    out = [CallsiteStat(site, api, n, us(idle_ns), us(blk),
                        us(idle_ns / n_steps) if n_steps else None)
           for (site, api), (n, idle_ns, blk) in agg.items()]
    out.sort(key=lambda c: (-c.idle_caused_us, -c.count, c.callsite))
    return out
