"""Event-based waits that do not block the host (``cudaStreamWaitEvent``).

For each GPU-side stream-wait record linked to its event record (Kineto ``cuda_sync``
``Stream Wait Event`` with ``wait_on_cuda_event_record_corr_id``), the waiting stream's
stall is the time from when its next op could otherwise have run (the later of the previous
op's end on that stream and the host launch of the next op) to the end of the awaited work
(the last op on the recorded stream launched before the event record), capped at the next
op's actual start. ``gpu_idle_us`` is the part of that stall when the whole GPU was idle.
Waits that cannot be linked are counted as such, never guessed; those whose record call is
known but not its stream (torch 2.11's Kineto) are counted apart. Times in us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from profplug.analyzers.core.timeline import (
    SYNC_STREAM_WAIT_EVENT,
    Timeline,
    launch_times,
    launch_tops,
)

if TYPE_CHECKING:
    from profplug.analyzers.stalls.gaps import DeviceIntervals


@dataclass
class StreamWaitStat:
    device: int
    stream: int  # the waiting stream
    count: int
    linked: int  # waits linked to the awaited event record
    stall_us: float
    gpu_idle_us: float
    record_only: int = 0  # not linked: the record call is known, its stream is not (Kineto
    # of torch 2.11: readers.kineto.waitlinks)


def stream_waits(tl: Timeline, intervals: dict[int, DeviceIntervals]) -> list[StreamWaitStat]:
    sel = np.nonzero(tl.gsync_kind == SYNC_STREAM_WAIT_EVENT)[0]
    if sel.size == 0:
        return []
    # the top-level launching call, before the sorted copies exist (its own temporaries
    # then never add to theirs: the worker's peak memory)
    launch = launch_times(tl, launch_tops(tl))
    # GPU ops sorted by (device, stream, corr): one block of rows per stream.
    order = np.lexsort((tl.gpu_corr, tl.gpu_stream, tl.gpu_device))
    o_launch = launch[order]
    del launch
    o_dev, o_str = tl.gpu_device[order], tl.gpu_stream[order]
    brk = (np.nonzero((o_dev[1:] != o_dev[:-1]) | (o_str[1:] != o_str[:-1]))[0] + 1).tolist()
    blocks = {(int(o_dev[a]), int(o_str[a])): (a, b)
              for a, b in zip([0, *brk], [*brk, o_dev.size], strict=True)} \
        if o_dev.size else {}
    del o_dev, o_str
    o_corr, o_start, o_end = tl.gpu_corr[order], tl.gpu_start_ns[order], tl.gpu_end_ns[order]
    del order

    dev, stream = tl.gsync_device[sel], tl.gsync_stream[sel]
    corr, wcorr, wstream = tl.gsync_corr[sel], tl.gsync_wait_corr[sel], tl.gsync_wait_stream[sel]
    linked = (wcorr >= 0) & (wstream >= 0) & (corr >= 0)
    n = sel.size
    awaited_end = np.zeros(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    for (d, s), idx in _groups(dev, wstream, linked).items():
        a, b = blocks.get((d, s), (0, 0))
        j = np.searchsorted(o_corr[a:b], wcorr[idx]) - 1  # last op launched before the record
        ok = j >= 0
        awaited_end[idx[ok]] = o_end[a + j[ok]]
        found[idx[ok]] = True
    could_run = np.zeros(n, dtype=np.int64)
    stall_end = np.zeros(n, dtype=np.int64)
    has_next = np.zeros(n, dtype=bool)
    for (d, s), idx in _groups(dev, stream, found).items():
        a, b = blocks.get((d, s), (0, 0))
        k = np.searchsorted(o_corr[a:b], corr[idx])  # next op launched after the wait
        ok = k < b - a
        idx, k = idx[ok], a + k[ok]
        prev_end = np.where(k > a, o_end[k - 1], o_launch[k])
        could_run[idx] = np.maximum(prev_end, o_launch[k])
        stall_end[idx] = np.minimum(awaited_end[idx], o_start[k])
        has_next[idx] = True
    stalled = has_next & (stall_end > could_run)
    out = []
    for (d, s), idx in sorted(_groups(dev, stream, np.ones(n, dtype=bool)).items()):
        st = idx[stalled[idx]]
        iv = intervals.get(d)
        idle = int(iv.idle_within(could_run[st], stall_end[st]).sum()) \
            if iv is not None and st.size else 0
        out.append(StreamWaitStat(d, s, int(idx.size), int(linked[idx].sum()),
                                  round(int((stall_end[st] - could_run[st]).sum()) / 1000.0, 3),
                                  round(idle / 1000.0, 3),
                                  int((~linked[idx] & (wcorr[idx] >= 0)).sum())))
    return out


def _groups(dev: np.ndarray, stream: np.ndarray, mask: np.ndarray
            ) -> dict[tuple[int, int], np.ndarray]:
    """(device, stream) -> indices (ascending) of the rows where ``mask`` holds."""
    rows = np.nonzero(mask)[0]
    if rows.size == 0:
        return {}
    d, s = dev[rows].astype(np.int64), stream[rows].astype(np.int64)
    if d.size and d.min() >= 0 and d.max() < 1 << 30 and s.min() >= 0 and s.max() < 1 << 32:
        keys, inv = np.unique((d << 32) | s, return_inverse=True)  # one int64 per pair
        pairs = np.stack([keys >> 32, keys & 0xFFFFFFFF], axis=1)
    else:
        pairs, inv = np.unique(np.stack([d, s], axis=1), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    cuts = np.searchsorted(inv[order], np.arange(1, len(pairs)))
    return {(int(p[0]), int(p[1])): g
            for p, g in zip(pairs, np.split(rows[order], cuts), strict=True)}
