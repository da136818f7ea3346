"""Checks of what pairs a host call with its GPU op: the correlation ids, and the two clocks.

Every analysis that asks "which call launched this op" (step GPU spans, launch latency, idle
causes, the what-if's replay) trusts that a CUDA runtime call's correlation id is its own and
that a kernel launch has one GPU op, and that an op never starts before its launch. A trace
that breaks either (ids reused across calls; a GPU clock hours off the host's) gave wrong
figures silently (issue #40 items 11, 12); each rank whose trace does gets one warning line.

The clocks are not corrected: a constant offset is not sound (the true launch latency is
not known, and shifting every op to its launch would hide real queueing); the figures that
depend on host/GPU order are said to be unreliable instead. Where the break is the rule
rather than the exception (``correlation_error``: most launches sharing their id, or nearly
every op before its launch), no figure of the rank can be trusted: the trace is refused in
one line (exit 3) rather than reported with wrong numbers.
"""

from __future__ import annotations

import numpy as np

from .timeline import Timeline

LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "hipLaunchKernel", "hipModuleLaunchKernel")
EARLY_TOLERANCE_NS = 50_000  # an op may start this much before its launch (clock jitter)
MIN_PAIRED = 3  # fewer paired ops: no clock verdict
FATAL_SHARE = 0.9  # this share of launches sharing ids, or of ops before their launch: refused


def _top(tl: Timeline) -> np.ndarray:
    """Top-level calls only: a call nested in another (a driver call inside its runtime
    call, both recorded) shares its parent's correlation id by design."""
    n = np.asarray(tl.api_corr).size
    return tl.api_tops() == np.arange(n) if n else np.zeros(0, dtype=bool)


def correlation_warnings(tl: Timeline) -> list[str]:
    """One line per broken assumption (reused correlation ids; a GPU clock before the
    host's), or none."""
    ac, gc = np.asarray(tl.api_corr), np.asarray(tl.gpu_corr)
    a_ok, g_ok = (ac >= 0) & _top(tl), gc >= 0
    if not a_ok.any() or not g_ok.any():
        return []
    out: list[str] = []
    ids, counts = np.unique(ac[a_ok], return_counts=True)
    shared_calls = int(counts[counts > 1].sum())
    launch_names = [i for i, n in enumerate(tl.names) if n.startswith(LAUNCHES)]
    launch_ids = np.unique(ac[a_ok & np.isin(tl.api_name, launch_names)])
    op_ids, op_counts = np.unique(gc[g_ok], return_counts=True)
    multi = np.isin(op_ids, launch_ids) & (op_counts > 1)
    if shared_calls or multi.any():
        what = []
        if shared_calls:
            what.append(f"{shared_calls:,} host calls share their correlation id with "
                        "another call")
        if multi.any():
            what.append(f"{int(multi.sum()):,} kernel launches correlate to more than one "
                        f"GPU op ({int(op_counts[multi].sum()):,} ops)")
        out.append(f"correlation ids reused ({'; '.join(what)}): launches cannot be paired "
                   "with their GPU ops, so step GPU spans, launch latencies, idle causes and "
                   "the what-if are unreliable")
    # the clocks: ops paired with a call whose id is its own, starting before that call
    once = ids[counts == 1]
    order = np.argsort(ac)
    sorted_ac = ac[order]
    paired = g_ok & np.isin(gc, once)
    if int(paired.sum()) >= MIN_PAIRED:
        call = order[np.searchsorted(sorted_ac, gc[paired])]
        lead = np.asarray(tl.api_start_ns)[call] - np.asarray(tl.gpu_start_ns)[paired]
        early = lead > EARLY_TOLERANCE_NS
        if 2 * int(early.sum()) > lead.size:
            out.append(f"the host and GPU clocks disagree: {int(early.sum()):,} of "
                       f"{lead.size:,} GPU ops start before the call that launched them "
                       f"(median {float(np.median(lead[early])) / 1e6:,.1f} ms early): idle "
                       "causes (device_sync, host_bound), the stall figures and the what-if, "
                       "which order host calls against GPU ops, are unreliable")
    return out


def correlation_error(tl: Timeline) -> str | None:
    """One line when the rank's trace cannot be attributed at all: at least ``FATAL_SHARE``
    of its kernel launches share their correlation id with another call, or of its paired
    GPU ops start over ``EARLY_TOLERANCE_NS`` before their launch; else None."""
    ac, gc = np.asarray(tl.api_corr), np.asarray(tl.gpu_corr)
    a_ok, g_ok = (ac >= 0) & _top(tl), gc >= 0
    if not a_ok.any() or not g_ok.any():
        return None
    launch_names = [i for i, n in enumerate(tl.names) if n.startswith(LAUNCHES)]
    is_launch = a_ok & np.isin(tl.api_name, launch_names)
    ids, counts = np.unique(ac[a_ok], return_counts=True)
    if is_launch.sum() >= MIN_PAIRED:
        shared = np.isin(ac[is_launch], ids[counts > 1])
        if shared.mean() >= FATAL_SHARE:
            return (f"{int(shared.sum()):,} of {shared.size:,} kernel launches share their "
                    "correlation id with another call: no GPU op can be paired with its launch "
                    "(the trace's ids are broken); refusing to attribute its idle time")
    once = ids[counts == 1]
    order = np.argsort(ac)
    paired = g_ok & np.isin(gc, once)
    if int(paired.sum()) >= MIN_PAIRED:
        call = order[np.searchsorted(ac[order], gc[paired])]
        lead = np.asarray(tl.api_start_ns)[call] - np.asarray(tl.gpu_start_ns)[paired]
        early = lead > EARLY_TOLERANCE_NS
        if early.mean() >= FATAL_SHARE:
            return (f"{int(early.sum()):,} of {lead.size:,} GPU ops start before the call that "
                    f"launched them (median {float(np.median(lead[early])) / 1e9:,.3f} s "
                    "early): the GPU and host clocks of this trace disagree; refusing to "
                    "attribute its idle time")
    return None
