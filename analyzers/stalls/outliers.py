"""Outlier steps described: what took the time, and the call site charged with most of it.

A step is an outlier by :func:`steps.stats.outlier_mask` (more than ``OUTLIER_K`` scaled MADs
from the median of its rank's per-step periods). Outliers stay out of the basis of every
per-step figure, and are listed here, per rank (the JSON ``ranks[].steps.outliers``, the
table and the HTML page), never silently dropped:

- ``step``: the step's number (``ProfilerStep#N``'s N, or its index), ``step_us``: its period;
- ``dominant``: the largest part of the step, among GPU busy time and its idle by cause
  (``dominant_cause``: ``busy`` or one of ``gaps.CAUSES``; ``dominant_us``: how much);
- ``callsite``: the call site charged with the most of that idle (for a synchronize cause),
  with ``peer``, the global rank on the other side of the send/recv that call sits in when the
  trace says (else None); for host-bound idle, where the host was (the innermost range open on
  the thread with the most CUDA calls halfway through the longest such gap, a step range
  aside); None for busy time;
- ``text``: the same in words, e.g. "174,020 us of it GPU idle in device-wide synchronizes,
  most in recv_from_prev_pipeline_rank_ > sync.device, waiting on rank 0".
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

import numpy as np
from profplug.analyzers.core.ranges import STEP
from profplug.analyzers.core.timeline import COMM_RECV, COMM_SEND, STEP_RE, Timeline
from profplug.analyzers.stalls.callsites import UNANNOTATED, display_name, enclosing
from profplug.analyzers.stalls.gaps import CAUSES, Gaps
from profplug.analyzers.stalls.per_step import OutlierStep, StepStats, gap_steps

WORDS = MappingProxyType({"busy": "GPU busy",
                          "device_sync": "GPU idle in device-wide synchronizes",
                          "event_sync": "GPU idle in host-blocking stream/event waits",
                          "host_bound": "GPU idle waiting for launches (host-bound)",
                          "other": "GPU idle the trace cannot attribute"})


def _peer(tl: Timeline, row: int) -> int | None:
    """The peer of the send/recv host range around API call ``row`` (same thread), if any."""
    if tl.comm_start_ns.size == 0 or row < 0:
        return None
    s, e, tid = tl.api_start_ns[row], tl.api_end_ns[row], tl.api_tid[row]
    sel = ((tl.comm_tid == tid) & (tl.comm_start_ns <= s) & (tl.comm_end_ns >= e)
           & ((tl.comm_kind == COMM_SEND) | (tl.comm_kind == COMM_RECV))
           & (tl.comm_peer >= 0))
    idx = np.nonzero(sel)[0]
    if idx.size == 0:
        return None
    return int(tl.comm_peer[idx[np.argmax(tl.comm_start_ns[idx])]])  # the innermost


def describe(tl: Timeline, steps: StepStats, span_s: np.ndarray, span_e: np.ndarray,
             gaps: Gaps, call_site: Sequence[str], call_row: np.ndarray
             ) -> list[OutlierStep]:
    """The outlier steps of ``steps`` (see the module docstring), in step order."""
    if not steps.outlier_steps:
        return []
    k = gap_steps(span_s, span_e, gaps.start_ns)
    order = np.argsort(k, kind="stable")  # the gaps of one step are one slice of it
    k_sorted = k[order]
    out: list[OutlierStep] = []
    for i in steps.outlier_steps:
        period_us = steps.period_us_per_step[i]
        sl = order[np.searchsorted(k_sorted, i, "left"):np.searchsorted(k_sorted, i, "right")]
        dur, cause_of, call_of = (gaps.end_ns - gaps.start_ns)[sl], gaps.cause[sl], gaps.call[sl]
        parts = {c: float(dur[cause_of == ci].sum()) / 1000.0 for ci, c in enumerate(CAUSES)}
        parts = {"busy": max(period_us - sum(parts.values()), 0.0), **parts}
        cause = max(parts, key=lambda c: parts[c])
        site: str | None = None
        peer: int | None = None
        if cause in ("device_sync", "event_sync"):
            ci = CAUSES.index(cause)
            hit = np.nonzero((cause_of == ci) & (call_of >= 0))[0]
            by_site: dict[str, float] = {}
            for g in hit.tolist():
                lab = call_site[int(call_of[g])]
                by_site[lab] = by_site.get(lab, 0.0) + float(dur[g])
            if by_site:
                top = max(by_site, key=lambda s: by_site[s])
                site = "unannotated calls" if top == UNANNOTATED else display_name(top)
                at = [g for g in hit.tolist() if call_site[int(call_of[g])] == top]
                call = int(call_of[max(at, key=lambda g: int(dur[g]))])
                peer = _peer(tl, int(call_row[call]))
        elif cause in ("host_bound", "other") and tl.api_tid.size:
            ci = CAUSES.index(cause)
            hit = np.nonzero(cause_of == ci)[0]
            if hit.size:
                g = sl[hit[np.argmax(dur[hit])]]
                t0 = (int(gaps.start_ns[g]) + int(gaps.end_ns[g])) // 2
                tids, counts = np.unique(tl.api_tid, return_counts=True)
                main = tids[np.argmax(counts)]
                (lab,) = enclosing(tl, np.array([t0]), np.array([t0]), np.array([main]))
                step_range = lab == STEP or STEP_RE.match(lab) is not None
                site = None if lab == UNANNOTATED or step_range else display_name(lab)
        text = f"{parts[cause]:,.0f} us of it {WORDS[cause]}"
        if site:
            text += f", most in {site}" if cause.endswith("_sync") else f", the host in {site}"
        if peer is not None:
            text += f", waiting on rank {peer}"
        out.append({"step": steps.number(i), "step_us": round(period_us, 3),
                    "dominant": text, "dominant_cause": cause,
                    "dominant_us": round(parts[cause], 3), "callsite": site, "peer": peer})
    return out
