"""One rank's part of the what-if model, built with vectorized lookups (all times int64 ns,
local indices). ``model.build_model`` joins the ranks; see its docstring for the rules.

Every "the last op launched before host time t on stream s" is one ``np.searchsorted`` per
stream over all the times asked about on it, never one call per time (``streams``).
"""

from __future__ import annotations

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import (
    SYNC_EVENT_SYNC,
    SYNC_STREAM_SYNC,
    Timeline,
    groups,
    launch_calls,
    launch_times,
)
from profplug.analyzers.graph.dropset import DropSpec, dropped_calls
from profplug.analyzers.graph.host import sync_copies
from profplug.analyzers.graph.streams import (
    Streams,
    api_by_corr,
    rank_streams,
    stream_wait_records,
    sync_records,
)
from profplug.analyzers.steps import stats

QUEUE_TOL_NS = 2_000  # an op starting within this of its stream becoming ready was queued
MIN_NS = np.iinfo(np.int64).min
I64 = np.int64


class RankModel:
    """Model pieces for one rank: op order per stream, launch latency and queue gap, stream
    waits (``dep_op`` waits for ``dep_on``), what each host-blocking call waits for
    (``wait_call`` waits for ``wait_op``), its base cost and wake-up, the dropped calls."""

    def __init__(self, tl: Timeline, drop: DropSpec, memo: Memo | None = None) -> None:
        self.tl = tl
        self.top = tl.api_tops()
        # the report's kinds: a top-level call is the strongest sync among itself and the
        # calls nested in it, a nested call none (classify.top_level_kinds)
        self.kind = classify.call_kinds(tl.names, tl.api_name, self.top, memo)
        self.is_top = self.top == np.arange(tl.api_start_ns.size)
        self.notes: list[str] = []  # trace-specific assumptions
        self.warns: list[str] = []
        self.o_api = launch_calls(tl, memo)  # per op its launching call, -1 none
        self.launch = launch_times(tl, self.o_api)
        n_unlinked = int((self.o_api < 0).sum())
        if n_unlinked:
            self.warns.append(
                f"rank {tl.rank}: {n_unlinked} GPU op(s) without a launching call "
                "in the trace keep their recorded start"
            )
        streams = rank_streams(tl, self.launch)
        self.stream_order, self.prev = streams.order, streams.prev
        self.dep_op, self.dep_on = self._stream_waits(streams)
        self.lat, self.gap = _op_timing(
            tl, self.prev, self.dep_op, self.dep_on, self.o_api, self.launch
        )
        self.blocking = self._blocking_calls()
        self.wait_call, self.wait_op = self._waits_of(np.nonzero(self.blocking)[0], streams)
        self.base, self.omin, self.wake = _blocking_costs(
            tl, self.blocking, self.wait_call, self.wait_op, self.o_api
        )
        self.dropped = dropped_calls(tl, self.kind, self.blocking, drop, memo)

    # ---- cudaStreamWaitEvent -> op dependencies ---------------------------------------
    def _stream_waits(self, streams: Streams) -> tuple[np.ndarray, np.ndarray]:
        """(waiting op, awaited op) per stream wait the trace's op order does not contradict."""
        tl = self.tl
        calls = np.nonzero(self.kind == classify.STREAM_WAIT)[0]
        if calls.size == 0:
            none = np.zeros(0, dtype=I64)
            return none, none
        record = stream_wait_records(tl, tl.api_corr[calls])
        t_ns = tl.api_start_ns[calls]
        both_streams = record >= 0
        both_streams[both_streams] = tl.gsync_wait_stream[record[both_streams]] >= 0
        waiter = np.full(calls.size, -1, dtype=I64)
        awaited = np.full(calls.size, -1, dtype=I64)
        if both_streams.any():  # the GPU-side record names both streams
            waiter[both_streams], awaited[both_streams] = _recorded_stream_waits(
                tl, streams, record[both_streams], t_ns[both_streams]
            )
        guessed = ~both_streams
        if guessed.any():  # no such record: the next op launched waits on the last op
            waiter[guessed], awaited[guessed] = _guessed_stream_waits(
                self.o_api, self.launch, tl, t_ns[guessed]
            )
            self.notes.append(
                _guess_note(tl.rank, int(guessed.sum()), int((record[guessed] >= 0).sum()))
            )
        found = (waiter >= 0) & (awaited >= 0)
        waiter, awaited = waiter[found], awaited[found]
        contradicted = tl.gpu_end_ns[awaited] > tl.gpu_start_ns[waiter] + QUEUE_TOL_NS
        if contradicted.any():  # the waiter ran first
            self.warns.append(
                f"rank {tl.rank}: {int(contradicted.sum())} stream wait(s) "
                "contradicted by the trace's op order were left out"
            )
        return waiter[~contradicted], awaited[~contradicted]

    # ---- host-blocking calls ------------------------------------------------------------
    def _blocking_calls(self) -> np.ndarray:
        """Per call (bool): a top-level device or event synchronize, or a device-to-host copy
        that returns only once the copy is done."""
        tl = self.tl
        syncs = self.is_top & ((self.kind == classify.DEVICE) | (self.kind == classify.EVENT))
        copies = sync_copies(tl, self.o_api, self.is_top) & ~syncs
        if copies.any():
            self.notes.append(
                f"rank {tl.rank}: {int(copies.sum())} device-to-host copy call(s) "
                "that return only once the copy is done wait for it"
            )
        blocking: np.ndarray = syncs | copies
        return blocking

    def _waits_of(self, calls: np.ndarray, streams: Streams) -> tuple[np.ndarray, np.ndarray]:
        """(call, op) pairs: what each blocking call of ``calls`` waits for."""
        tl = self.tl
        device_wide = self.kind[calls] == classify.DEVICE
        own_copy = np.full(tl.api_start_ns.size, -1, dtype=I64)  # a call's own copy, -1 none
        linked = np.nonzero(self.o_api >= 0)[0]
        own_copy[self.o_api[linked]] = linked  # a blocking copy waits for its own copy
        pairs = _device_wide_waits(tl, streams, calls[device_wide])
        copy_call = ~device_wide & (own_copy[calls] >= 0)
        pairs.append((calls[copy_call], own_copy[calls[copy_call]]))
        other = ~device_wide & ~copy_call
        if other.any():
            recorded, n_unknown = _recorded_sync_waits(tl, streams, calls[other])
            pairs += recorded
            if n_unknown:
                self.notes.append(
                    f"rank {tl.rank}: {n_unknown} stream/event synchronize "
                    "call(s) with no record of what they wait for keep their "
                    "recorded duration"
                )
        wait_call = np.concatenate([c for c, _ in pairs])
        wait_op = np.concatenate([o for _, o in pairs])
        found = wait_op >= 0
        return wait_call[found].astype(I64), wait_op[found].astype(I64)


def _recorded_stream_waits(
    tl: Timeline, streams: Streams, record: np.ndarray, t_ns: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Stream waits with a GPU-side ``record`` naming both streams (calls at host times
    ``t_ns``): the first op launched after the call on the waiting stream waits for the last
    op launched before the event's record call on the awaited one."""
    device = tl.gsync_device[record].astype(I64)
    record_call = api_by_corr(tl, tl.gsync_wait_corr[record])
    recorded_ns = np.where(record_call >= 0, tl.api_start_ns[np.maximum(record_call, 0)], t_ns)
    awaited = streams.last_launched_before(
        device, tl.gsync_wait_stream[record].astype(I64), recorded_ns
    )
    waiter = streams.first_launched_after(device, tl.gsync_stream[record].astype(I64), t_ns)
    return waiter, awaited


def _guessed_stream_waits(
    o_api: np.ndarray, launch_ns: np.ndarray, tl: Timeline, t_ns: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Stream waits without a record of both streams (calls at host times ``t_ns``): the next
    op launched waits for the last op launched on another stream before it; -1 none."""
    linked = np.nonzero(o_api >= 0)[0]
    by_launch = linked[np.argsort(launch_ns[linked], kind="stable")]
    if not by_launch.size:
        none = np.full(t_ns.size, -1, dtype=I64)
        return none, none.copy()
    stream_key = tl.gpu_device[by_launch].astype(I64) * (1 << 32) + tl.gpu_stream[by_launch].astype(
        I64
    )
    new_run = np.concatenate(([True], stream_key[1:] != stream_key[:-1]))
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(stream_key.size), 0))
    k = np.searchsorted(launch_ns[by_launch], t_ns, side="right")
    found = k < by_launch.size
    next_op = np.minimum(k, by_launch.size - 1)
    before_run = run_start[next_op] - 1  # the last op launched on another stream
    waiter = np.where(found, by_launch[next_op], -1)
    awaited = np.where(found & (before_run >= 0), by_launch[np.maximum(before_run, 0)], -1)
    return waiter, awaited


def _guess_note(rank: int, n_guessed: int, n_waiting_stream_only: int) -> str:
    """The assumption note for the guessed stream waits."""
    why = (
        "without a GPU-side record"
        if not n_waiting_stream_only
        else f"whose awaited stream the trace does not give ({n_waiting_stream_only} with a "
        "GPU-side record of the waiting stream only, as torch 2.11's Kineto writes them)"
    )
    return (
        f"rank {rank}: {n_guessed} cudaStreamWaitEvent call(s) {why}: assumed to make "
        "the next op launched wait for the last op launched on another stream"
    )


def _device_wide_waits(
    tl: Timeline, streams: Streams, calls: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(call, op) per device-wide synchronize and stream: the last op launched before it on
    every stream (-1 none)."""
    t_ns = tl.api_start_ns[calls]
    pairs = []
    for key, ops in streams.ops.items():
        k = np.searchsorted(streams.launch_reach_ns[key], t_ns, side="left") - 1
        pairs.append((calls, np.where(k >= 0, ops[np.maximum(k, 0)], -1)))
    return pairs


def _recorded_sync_waits(
    tl: Timeline, streams: Streams, calls: np.ndarray
) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """(call, op) pairs of stream and event synchronizes from their GPU-side records: a
    stream sync waits for its stream's last op launched before it; an event sync (its record
    naming the awaited stream) for the last op launched before the event's record call. And
    how many calls have no such record."""
    t_ns = tl.api_start_ns[calls]
    record = sync_records(tl, tl.api_corr[calls])
    record_kind = np.full(record.size, -1, dtype=I64)
    record_kind[record >= 0] = tl.gsync_kind[record[record >= 0]]
    stream_sync = record_kind == SYNC_STREAM_SYNC
    event_sync = record_kind == SYNC_EVENT_SYNC
    if event_sync.any():
        event_sync[event_sync] = tl.gsync_wait_stream[record[event_sync]] >= 0
    pairs = []
    if stream_sync.any():
        rows = record[stream_sync]
        pairs.append(
            (
                calls[stream_sync],
                streams.last_launched_before(
                    tl.gsync_device[rows].astype(I64),
                    tl.gsync_stream[rows].astype(I64),
                    t_ns[stream_sync],
                ),
            )
        )
    if event_sync.any():
        rows = record[event_sync]
        record_call = api_by_corr(tl, tl.gsync_wait_corr[rows])
        recorded_ns = np.where(
            record_call >= 0, tl.api_start_ns[np.maximum(record_call, 0)], t_ns[event_sync]
        )
        pairs.append(
            (
                calls[event_sync],
                streams.last_launched_before(
                    tl.gsync_device[rows].astype(I64),
                    tl.gsync_wait_stream[rows].astype(I64),
                    recorded_ns,
                ),
            )
        )
    return pairs, int((~(stream_sync | event_sync)).sum())


def _op_timing(
    tl: Timeline,
    prev: np.ndarray,
    dep_op: np.ndarray,
    dep_on: np.ndarray,
    o_api: np.ndarray,
    launch_ns: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per op its launch latency and queue gap (ns) to replay: an op queued behind its stream
    (it started within ``QUEUE_TOL_NS`` of the stream becoming ready, or was launched at least
    a typical latency before) keeps its gap after the stream was ready and at most the
    typical latency; any other op keeps its observed latency and at most the typical gap."""
    start_ns, end_ns = tl.gpu_start_ns, tl.gpu_end_ns
    ready_ns = np.where(prev >= 0, end_ns[np.maximum(prev, 0)], MIN_NS)
    np.maximum.at(ready_ns, dep_op, end_ns[dep_on])
    has_ready = ready_ns > MIN_NS
    slack_ns = np.where(has_ready, start_ns - ready_ns, 0)
    queued = has_ready & (slack_ns <= QUEUE_TOL_NS)
    observed_ns = start_ns - launch_ns
    free = (o_api >= 0) & ~queued
    typical_latency_ns = int(stats.median(observed_ns[free])) if free.any() else 0
    # launched at least a typical latency before its stream was ready: the stream, not
    # the launch, set its start, however long after ready it came (a slow dispatch);
    # its time since the launch is a queue's wait, never a latency to replay
    queued |= has_ready & (ready_ns - launch_ns >= typical_latency_ns)
    queue_gap_ns = slack_ns[queued]
    typical_gap_ns = int(stats.median(np.maximum(queue_gap_ns, 0))) if queue_gap_ns.size else 0
    latency_ns = np.where(queued, np.minimum(observed_ns, typical_latency_ns), observed_ns)
    gap_ns = np.where(queued, slack_ns, np.minimum(typical_gap_ns, slack_ns))
    gap_ns[~has_ready] = 0
    return latency_ns, gap_ns


def _blocking_costs(
    tl: Timeline,
    blocking: np.ndarray,
    wait_call: np.ndarray,
    wait_op: np.ndarray,
    o_api: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per call (ns): its base cost (the call when it does not wait), its cost when dropped
    (0 for a synchronize: it is gone; a blocking copy still copies) and its wake-up (return
    latency after the awaited work is done), from the blocking calls of its API name."""
    duration_ns = tl.api_end_ns - tl.api_start_ns
    awaited_end_ns = np.full(tl.api_start_ns.size, MIN_NS, dtype=I64)
    np.maximum.at(awaited_end_ns, wait_call, tl.gpu_end_ns[wait_op])
    waits = awaited_end_ns > MIN_NS
    blocked = waits & (awaited_end_ns > tl.api_start_ns)
    wake_ns = np.where(blocked, tl.api_end_ns - awaited_end_ns, 0)
    base_ns, dropped_ns = duration_ns.copy(), duration_ns.copy()
    for _, calls in groups(tl.api_name, np.nonzero(blocking)[0]):  # per API name
        was_blocked = calls[blocked[calls]]
        not_blocked = calls[~blocked[calls]]
        typical_wake_ns = int(stats.median(wake_ns[was_blocked])) if was_blocked.size else 0
        cheap_ns = duration_ns[not_blocked] if not_blocked.size else wake_ns[was_blocked]
        cheapest_ns = max(int(cheap_ns.min()), 0) if cheap_ns.size else 0
        dropped_ns[calls] = cheapest_ns
        base_ns[was_blocked] = np.minimum(duration_ns[was_blocked], cheapest_ns)
        waited_briefly = calls[waits[calls] & ~blocked[calls]]
        wake_ns[waited_briefly] = np.minimum(
            typical_wake_ns, tl.api_end_ns[waited_briefly] - awaited_end_ns[waited_briefly]
        )
    is_own_copy = np.zeros(tl.api_start_ns.size, dtype=bool)
    copy_calls = o_api[o_api >= 0]
    is_own_copy[copy_calls[blocking[copy_calls]]] = True
    dropped_ns[blocking & ~is_own_copy] = 0  # a dropped synchronize is gone
    return base_ns, dropped_ns, wake_ns
