"""Checks of what pairs a host call with its GPU op: the correlation ids, and the two clocks.

Every analysis that asks "which call launched this op" (step GPU spans, launch latency, idle
causes, the what-if's replay) trusts that a CUDA runtime call's correlation id is its own and
that a kernel launch has one GPU op, and that an op never starts before its launch. A trace
that breaks either (ids reused across calls; a GPU clock hours off the host's) gave wrong
figures silently (issue #40 items 11, 12); each rank whose trace does gets one warning line.

The clocks are not corrected: a constant offset is not sound (the true launch latency is
not known, and shifting every op to its launch would hide real queueing); the figures that
depend on host/GPU order are said to be unreliable instead. Where the break is the rule
rather than the exception (``correlation_check``: most launches sharing their id, or nearly
every op before its launch), no figure of the rank can be trusted: the trace is refused in
one line (exit 3) rather than reported with wrong numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core.timeline import Timeline

LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "hipLaunchKernel", "hipModuleLaunchKernel")
EARLY_TOLERANCE_NS = 50_000  # an op may start this much before its launch (clock jitter)
MIN_PAIRED = 3  # fewer paired ops: no clock verdict
FATAL_SHARE = 0.9  # this share of launches sharing ids, or of ops before their launch: refused


@dataclass
class _Pairing:
    """What both checks read, made once per rank: the top-level calls' ids and how often
    each is used, the kernel launches among them, and the lead of every op paired with a
    call whose id is its own (the call's start minus the op's, ns)."""

    ids: np.ndarray
    counts: np.ndarray
    launch_ids: np.ndarray  # the launches' ids (each once)
    launch_shared: np.ndarray  # per launch: its id used by another call too
    op_ids: np.ndarray
    op_counts: np.ndarray
    lead: np.ndarray


def _pairing(tl: Timeline) -> _Pairing | None:
    ac, gc = np.asarray(tl.api_corr), np.asarray(tl.gpu_corr)
    n = ac.size
    # top-level calls only: a call nested in another (a driver call inside its runtime
    # call, both recorded) shares its parent's correlation id by design
    a_ok = (ac >= 0) & (tl.api_tops() == np.arange(n)) if n else np.zeros(0, dtype=bool)
    g_ok = gc >= 0
    if not a_ok.any() or not g_ok.any():
        return None
    calls = np.nonzero(a_ok)[0]
    ids, counts = np.unique(ac[calls], return_counts=True)
    launch_names = [i for i, name in enumerate(tl.names) if name.startswith(LAUNCHES)]
    launches = calls[np.isin(tl.api_name[calls], launch_names)]
    op_ids, op_counts = np.unique(gc[g_ok], return_counts=True)
    # the ops paired with a call whose id is its own, and that call
    paired = g_ok & np.isin(gc, ids[counts == 1])
    by_id = calls[np.argsort(ac[calls], kind="stable")]
    call = by_id[np.searchsorted(ac[by_id], gc[paired])]
    lead = np.asarray(tl.api_start_ns)[call] - np.asarray(tl.gpu_start_ns)[paired]
    return _Pairing(ids, counts, np.unique(ac[launches]),
                    np.isin(ac[launches], ids[counts > 1]), op_ids, op_counts, lead)


def correlation_check(tl: Timeline) -> tuple[str | None, list[str]]:
    """``(error, warnings)`` of one rank. The error, one line, when the trace cannot be
    attributed at all: at least ``FATAL_SHARE`` of its kernel launches share their
    correlation id with another call, or of its paired GPU ops start over
    ``EARLY_TOLERANCE_NS`` before their launch. Else the warnings, one line per broken
    assumption (reused ids; a GPU clock before the host's), or none."""
    p = _pairing(tl)
    if p is None:
        return None, []
    bad = _error(p)
    return bad, [] if bad is not None else _warnings(p)


def _warnings(p: _Pairing) -> list[str]:
    out: list[str] = []
    shared_calls = int(p.counts[p.counts > 1].sum())
    multi = np.isin(p.op_ids, p.launch_ids) & (p.op_counts > 1)
    if shared_calls or multi.any():
        what = []
        if shared_calls:
            what.append(f"{shared_calls:,} host calls share their correlation id with "
                        "another call")
        if multi.any():
            what.append(f"{int(multi.sum()):,} kernel launches correlate to more than one "
                        f"GPU op ({int(p.op_counts[multi].sum()):,} ops)")
        out.append(f"correlation ids reused ({'; '.join(what)}): launches cannot be paired "
                   "with their GPU ops, so step GPU spans, launch latencies, idle causes and "
                   "the what-if are unreliable")
    if p.lead.size >= MIN_PAIRED:
        early = p.lead > EARLY_TOLERANCE_NS
        if 2 * int(early.sum()) > p.lead.size:
            out.append(f"the host and GPU clocks disagree: {int(early.sum()):,} of "
                       f"{p.lead.size:,} GPU ops start before the call that launched them "
                       f"(median {float(np.median(p.lead[early])) / 1e6:,.1f} ms early): idle "
                       "causes (device_sync, host_bound), the stall figures and the what-if, "
                       "which order host calls against GPU ops, are unreliable")
    return out


def _error(p: _Pairing) -> str | None:
    shared = p.launch_shared
    if shared.size >= MIN_PAIRED and shared.mean() >= FATAL_SHARE:
        return (f"{int(shared.sum()):,} of {shared.size:,} kernel launches share their "
                "correlation id with another call: no GPU op can be paired with its launch "
                "(the trace's ids are broken); refusing to attribute its idle time")
    if p.lead.size >= MIN_PAIRED:
        early = p.lead > EARLY_TOLERANCE_NS
        if early.mean() >= FATAL_SHARE:
            return (f"{int(early.sum()):,} of {p.lead.size:,} GPU ops start before the call "
                    f"that launched them (median {float(np.median(p.lead[early])) / 1e9:,.3f} "
                    "s early): the GPU and host clocks of this trace disagree; refusing to "
                    "attribute its idle time")
    return None
