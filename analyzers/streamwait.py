"""Event-based waits that do not block the host (``cudaStreamWaitEvent``).

For each GPU-side stream-wait record linked to its event record (Kineto ``cuda_sync``
``Stream Wait Event`` with ``wait_on_cuda_event_record_corr_id``), the waiting stream's
stall is the time from when its next op could otherwise have run (the later of the previous
op's end on that stream and the host launch of the next op) to the end of the awaited work
(the last op on the recorded stream launched before the event record), capped at the next
op's actual start. ``gpu_idle_us`` is the part of that stall when the whole GPU was idle.
Waits that cannot be linked are counted as such, never guessed. Times in us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .steps import launch_times
from .timeline import SYNC_STREAM_WAIT_EVENT, Timeline

if TYPE_CHECKING:
    from .gaps import DeviceIntervals


@dataclass
class StreamWaitStat:
    device: int
    stream: int  # the waiting stream
    count: int
    linked: int  # waits linked to the awaited event record
    stall_us: float
    gpu_idle_us: float


def stream_waits(tl: Timeline, intervals: dict[int, DeviceIntervals]) -> list[StreamWaitStat]:
    sel = np.nonzero(tl.gsync_kind == SYNC_STREAM_WAIT_EVENT)[0]
    if sel.size == 0:
        return []
    launch = launch_times(tl)
    out: dict[tuple[int, int], list[float]] = {}
    streams: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}

    def ops_of(dev: int, stream: int) -> tuple[np.ndarray, ...]:
        key = (dev, stream)
        if key not in streams:
            idx = np.nonzero((tl.gpu_device == dev) & (tl.gpu_stream == stream))[0]
            idx = idx[np.argsort(tl.gpu_corr[idx], kind="stable")]
            streams[key] = (tl.gpu_corr[idx], tl.gpu_start_ns[idx], tl.gpu_end_ns[idx],
                            launch[idx])
        return streams[key]

    for i in sel:
        dev, stream = int(tl.gsync_device[i]), int(tl.gsync_stream[i])
        acc = out.setdefault((dev, stream), [0, 0, 0.0, 0.0])
        acc[0] += 1
        wcorr, wstream, corr = (int(tl.gsync_wait_corr[i]), int(tl.gsync_wait_stream[i]),
                                int(tl.gsync_corr[i]))
        if wcorr < 0 or wstream < 0 or corr < 0:
            continue
        acc[1] += 1
        a_corr, _, a_end, _ = ops_of(dev, wstream)
        j = int(np.searchsorted(a_corr, wcorr)) - 1  # last op launched before the record
        if j < 0:
            continue
        awaited_end = int(a_end[j])
        w_corr, w_start, w_end, w_launch = ops_of(dev, stream)
        k = int(np.searchsorted(w_corr, corr))  # next op launched after the wait
        if k >= w_corr.size:
            continue
        prev_end = int(w_end[k - 1]) if k > 0 else int(w_launch[k])
        could_run = max(prev_end, int(w_launch[k]))
        stall_end = min(awaited_end, int(w_start[k]))
        if stall_end <= could_run:
            continue
        acc[2] += stall_end - could_run
        iv = intervals.get(dev)
        if iv is not None:
            acc[3] += float(iv.idle_within(np.array([could_run]), np.array([stall_end]))[0])
    return [StreamWaitStat(d, s, int(a[0]), int(a[1]), round(a[2] / 1000.0, 3),
                           round(a[3] / 1000.0, 3))
            for (d, s), a in sorted(out.items())]
