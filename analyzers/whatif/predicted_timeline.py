"""A replay of one rank as a :class:`Timeline`, so that the report's own figures (its steps,
its stall analysis) read the replay as they read a trace.

Each GPU op and API call sits at its replayed time; the step ranges (host times) move with
the replayed calls of the rank's main thread (:func:`moved_with_calls`); annotations stay
where they were (the what-if's brief stall analysis reads none), or move with their
thread's calls (:func:`predicted_timeline_with_annotations`, ``whatif --against``). The
predicted timeline has no dropped call, nor a call nested in one. All times are int64 ns.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from profplug.analyzers.core.timeline import Timeline, groups
from profplug.analyzers.graph.model import Model
from profplug.analyzers.whatif.simulate import Replay

# an int64 product at or past this size is computed in float64 (int64 holds up to 2^63 - 1)
_EXACT_PRODUCT_LIMIT = 2.0**62


def rescaled_ns(
    offset_ns: np.ndarray, new_span_ns: np.ndarray, old_span_ns: np.ndarray
) -> np.ndarray:
    """``offset_ns * new_span_ns / old_span_ns`` rounded to whole ns (int64), element by
    element; ``old_span_ns`` > 0. Exact while the product fits int64; past that (an offset
    and a span over ~3 s each) in float64, within 1 ns for spans under 10^15 ns."""
    too_big = np.abs(offset_ns.astype(np.float64) * new_span_ns) >= _EXACT_PRODUCT_LIMIT
    if not too_big.any():  # every product exact
        rounded: np.ndarray = (offset_ns * new_span_ns + old_span_ns // 2) // old_span_ns
        return rounded
    exact = (
        np.where(too_big, 0, offset_ns) * np.where(too_big, 0, new_span_ns) + old_span_ns // 2
    ) // old_span_ns
    # only the large products, clipped to int64 (a time far outside, a clock jump)
    ratio = new_span_ns.astype(np.float64) / old_span_ns
    approx = np.rint(np.where(too_big, offset_ns, 0).astype(np.float64) * ratio)
    approx = np.clip(approx, -_EXACT_PRODUCT_LIMIT, _EXACT_PRODUCT_LIMIT)
    rounded = np.where(too_big, approx.astype(np.int64), exact)
    return rounded


def moved_with_calls(
    model: Model, replay: Replay, calls: np.ndarray, times_ns: np.ndarray
) -> np.ndarray:
    """Host times ``times_ns`` moved with the replayed calls of one thread (``calls``: its
    top-level calls in order). A time inside a call, or inside the host gap between two
    calls, keeps its fraction of that call or gap, so a step boundary stays between the same
    two calls when the replay shortens gaps (dropped calls' host work, ``HostCosts``); a time
    before the first call or after the last one moves with that call."""
    if not len(calls) or times_ns.size == 0:
        return times_ns.copy()
    calls = np.asarray(calls)
    old_start, old_end = model.a_start[calls], model.a_end[calls]
    new_start, new_end = replay.a_start[calls], replay.a_end[calls]
    n_calls = calls.size
    next_call = np.searchsorted(old_start, times_ns, side="left")  # first call at or after
    next_or_last = np.minimum(next_call, n_calls - 1)
    moved: np.ndarray = np.where(
        next_call < n_calls,
        times_ns + new_start[next_or_last] - old_start[next_or_last],
        times_ns + new_end[-1] - old_end[-1],
    )
    prev_call = np.maximum(next_call - 1, 0)  # the call starting before the time
    between_calls = (next_call > 0) & (next_call < n_calls)
    in_call = (next_call > 0) & (times_ns < old_end[prev_call])
    # inside the previous call: the same fraction of its replayed duration
    call_ns = np.maximum(old_end[prev_call] - old_start[prev_call], 1)
    in_call_at = new_start[prev_call] + rescaled_ns(
        times_ns - old_start[prev_call], new_end[prev_call] - new_start[prev_call], call_ns
    )
    moved = np.where(in_call, in_call_at, moved)
    # in the gap after the previous call: the same fraction of the replayed gap
    gap_ns = np.maximum(old_start[next_or_last] - old_end[prev_call], 1)
    in_gap_at = new_end[prev_call] + rescaled_ns(
        times_ns - old_end[prev_call], new_start[next_or_last] - new_end[prev_call], gap_ns
    )
    moved = np.where(between_calls & ~in_call, in_gap_at, moved)
    return moved


def main_thread_calls(model: Model, rank: int) -> np.ndarray:
    """The top-level calls, in order, of the rank's thread with the most of them (the first
    such thread; none: empty)."""
    rank_threads = (
        calls
        for (call_rank, _), calls in zip(model.thread_key, model.threads, strict=True)
        if call_rank == rank
    )
    longest: np.ndarray = max(rank_threads, key=len, default=np.zeros(0, dtype=np.int64))
    return longest


def kept_calls(model: Model, rank: int) -> np.ndarray:
    """Per API call of the rank (bool): not dropped, nor nested in a dropped call."""
    first, end = model.rank_a[rank]
    kept: np.ndarray = ~model.a_dropped[model.a_top[first:end]]
    return kept


def replayed_timeline(tl: Timeline, model: Model, replay: Replay) -> Timeline:
    """``tl`` at the times of ``replay``, every call kept (the replay as recorded)."""
    return _at_replayed_times(tl, model, replay, slice(None))


def predicted_timeline(tl: Timeline, model: Model, replay: Replay, kept: np.ndarray) -> Timeline:
    """``tl`` at the times of ``replay`` with only the ``kept`` calls (:func:`kept_calls`):
    the predicted run."""
    return _at_replayed_times(tl, model, replay, kept)


def predicted_timeline_with_annotations(tl: Timeline, model: Model, replay: Replay) -> Timeline:
    """The predicted run (every call kept that is not dropped, nor nested in a dropped one)
    with the annotations moved along with their thread's replayed calls."""
    predicted = predicted_timeline(tl, model, replay, kept_calls(model, tl.rank))
    ann_start_ns, ann_end_ns = _moved_annotations(tl, model, replay)
    return replace(predicted, ann_start_ns=ann_start_ns, ann_end_ns=ann_end_ns)


def _moved_annotations(tl: Timeline, model: Model, replay: Replay) -> tuple[np.ndarray, np.ndarray]:
    """Each annotation's start and end moved with its thread's replayed calls (each time on
    its own: a range that starts and ends in one call stays in it); an end never before its
    start. The trace's own arrays stay as they are."""
    rows_by_thread = dict(groups(tl.ann_tid))
    if not rows_by_thread:
        return tl.ann_start_ns, tl.ann_end_ns
    starts, ends = tl.ann_start_ns.copy(), tl.ann_end_ns.copy()
    for (rank, tid), calls in zip(model.thread_key, model.threads, strict=True):
        rows = rows_by_thread.get(tid) if rank == tl.rank else None
        if rows is None:
            continue
        moved = moved_with_calls(
            model, replay, calls, np.concatenate([tl.ann_start_ns[rows], tl.ann_end_ns[rows]])
        )
        starts[rows] = moved[: rows.size]
        ends[rows] = np.maximum(moved[rows.size :], starts[rows])
    return starts, ends


def _at_replayed_times(
    tl: Timeline, model: Model, replay: Replay, kept: np.ndarray | slice
) -> Timeline:
    """``tl`` with its ops and ``kept`` calls at their replayed times and its steps moved;
    no warnings or skipped counts (they are the trace's)."""
    call_first, call_end = model.rank_a[tl.rank]
    op_first, op_end = model.rank_o[tl.rank]
    step_start_ns, step_end_ns = _moved_steps(tl, model, replay)
    return replace(
        tl,
        gpu_start_ns=replay.o_start[op_first:op_end],
        gpu_end_ns=replay.o_end[op_first:op_end],
        api_start_ns=replay.a_start[call_first:call_end][kept],
        api_end_ns=replay.a_end[call_first:call_end][kept],
        api_tid=tl.api_tid[kept],
        api_name=tl.api_name[kept],
        api_corr=tl.api_corr[kept],
        step_start_ns=step_start_ns,
        step_end_ns=step_end_ns,
        warnings=[],
        skipped={},
    )


def _moved_steps(tl: Timeline, model: Model, replay: Replay) -> tuple[np.ndarray, np.ndarray]:
    """The step ranges' starts and ends moved with the rank's main thread's calls; an end
    never before its start."""
    n_steps = tl.step_start_ns.size
    moved = moved_with_calls(
        model,
        replay,
        main_thread_calls(model, tl.rank),
        np.concatenate([tl.step_start_ns, tl.step_end_ns]),
    )
    starts = moved[:n_steps]
    return starts, np.maximum(moved[n_steps:], starts)
