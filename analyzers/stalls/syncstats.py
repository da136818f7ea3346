"""Per synchronize API: how many calls, how long they blocked the host and the GPU idle they
caused (``SyncStat``, one row of the stall report's sync table; times in us, computed in ns)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import SyncKind


@dataclass
class SyncStat:
    api: str
    kind: SyncKind
    count: int
    host_blocked_us: float
    host_blocked_p50_us: float
    host_blocked_p99_us: float
    idle_caused_us: float


def _us(ns: float | int | np.integer) -> float:
    return round(float(ns) / 1000.0, 3)


def _p50_p99(x: np.ndarray) -> tuple[float, float]:  # one np.percentile call, in us
    p50, p99 = np.percentile(x, [50, 99]) if x.size else (0.0, 0.0)
    return _us(p50), _us(p99)


def sync_stats(tl: Timeline, api_kind: np.ndarray, call_api: list[str], c_start: np.ndarray,
                c_end: np.ndarray, c_kind: np.ndarray, idle_per_call: np.ndarray
                ) -> list[SyncStat]:
    """One row per (API, kind) of the rank's sync calls, and one per non-blocking stream-wait
    API (counted; their stall is in ``stream_waits``), most idle caused first."""
    out: list[SyncStat] = []
    names = np.array([classify.base_name(a) for a in call_api], dtype=object)
    # by name and kind: a call that is no sync by name (cudaFree) is one when a sync is
    # nested in it, and a name may then come with two kinds
    for api, k in sorted(set(zip(names.tolist(), c_kind.tolist(), strict=True))):
        sel = (names == api) & (c_kind == k)
        blocked = (c_end - c_start)[sel]
        kind = classify.KIND_LABELS[int(k)]
        out.append(SyncStat(api, kind, int(sel.sum()), _us(blocked.sum()), *_p50_p99(blocked),
                            _us(idle_per_call[sel].sum())))
    # Non-blocking stream waits: counted here, their stall is in stream_waits.
    sw = np.nonzero(api_kind == classify.STREAM_WAIT)[0]
    if sw.size:
        sw_names = [classify.base_name(tl.names[n]) for n in tl.api_name[sw]]
        for api in sorted(set(sw_names)):
            sel = np.array([n == api for n in sw_names])
            d = (tl.api_end_ns[sw] - tl.api_start_ns[sw])[sel]
            out.append(SyncStat(api, SyncKind.STREAM_WAIT, int(sel.sum()), _us(d.sum()),
                                *_p50_p99(d), 0.0))
    out.sort(key=lambda s: (-s.idle_caused_us, -s.host_blocked_us, s.api))
    return out
