"""What a rank's stall analysis would find again, taken from the what-if's model: each call's
top-level sync kind and each GPU op's launch time (ns). ``analyze_rank(api_kind=...,
launch=...)`` takes them instead of working them out from the timeline's nesting and
correlation ids.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from profplug.analyzers.graph.model import Model
from profplug.analyzers.whatif.simulate import Replay

# of the model's graph inputs (``model._IN_GRAPH``), those read here: kept for the rank
# figures once both graphs exist (``model.replay_only``)
RESULTS_READ = ("o_top", "a_prev")


class StallLinks(NamedTuple):
    """A timeline's links as its stall analysis finds them: per API call its top-level sync
    kind (``classify.top_level_kinds``), per GPU op its launch time (ns)."""

    api_kind: np.ndarray
    launch_ns: np.ndarray


def op_launch_times_ns(
    call_start_ns: np.ndarray, launching_call: np.ndarray, op_start_ns: np.ndarray
) -> np.ndarray:
    """Each op's launch time (ns): the start of the top-level call that launched it
    (``launching_call`` >= 0, an index into ``call_start_ns``), else its own start
    (``op_start_ns``: no host call launched it)."""
    launch_ns = op_start_ns.copy()
    launched = launching_call >= 0
    launch_ns[launched] = call_start_ns[launching_call[launched]]
    return launch_ns


def recorded_links(model: Model, rank: int) -> StallLinks:
    """The recorded rank's links: the model's kinds and its recorded launches."""
    call_first, call_end = model.rank_a[rank]
    op_first, op_end = model.rank_o[rank]
    return StallLinks(
        model.a_kind[call_first:call_end],
        op_launch_times_ns(
            model.a_start, model.o_top[op_first:op_end], model.o_start[op_first:op_end]
        ),
    )


def replayed_links(model: Model, replay: Replay, rank: int, kept: np.ndarray) -> StallLinks | None:
    """The links of the rank's replayed timeline with only the ``kept`` calls, when the
    model's are its own: no op launched by a dropped call, and the replay kept the recorded
    nesting (:func:`_nesting_kept`) and each thread's order (:func:`_thread_order_kept`).
    Then ``top_level`` on the replayed times gives the recorded tops, and a correlation
    lookup the recorded launches. None otherwise (the analysis finds its own)."""
    op_first, op_end = model.rank_o[rank]
    launching_call = model.o_top[op_first:op_end]
    if model.a_dropped[launching_call[launching_call >= 0]].any():
        return None
    if not (_nesting_kept(model, replay, rank, kept) and _thread_order_kept(model, replay, rank)):
        return None
    call_first, call_end = model.rank_a[rank]
    return StallLinks(
        model.a_kind[call_first:call_end][kept],
        op_launch_times_ns(replay.a_start, launching_call, replay.o_start[op_first:op_end]),
    )


def _local(call: np.ndarray, call_first: int) -> np.ndarray:
    """Global call indices as indices into the rank's calls."""
    return call - call_first if call_first else call


def _nesting_kept(model: Model, replay: Replay, rank: int, kept: np.ndarray) -> bool:
    """Each kept nested call starts inside its top-level call and sorts after it."""
    call_first, call_end = model.rank_a[rank]
    start_ns, end_ns = replay.a_start[call_first:call_end], replay.a_end[call_first:call_end]
    top = _local(model.a_top[call_first:call_end], call_first)
    nested = (kept & (top != np.arange(call_end - call_first))).nonzero()[0]
    parent = top[nested]
    nested_start_ns, parent_end_ns = start_ns[nested], end_ns[parent]
    sorts_after = (
        (start_ns[parent] < nested_start_ns) | (end_ns[nested] < parent_end_ns) | (parent < nested)
    )
    return bool(((nested_start_ns < parent_end_ns) & sorts_after).all())


def _thread_order_kept(model: Model, replay: Replay, rank: int) -> bool:
    """Each top-level call starts after the previous one on its thread ends, and after it
    starts (dropped calls too: a chain of such starts and ends orders the kept calls)."""
    call_first, call_end = model.rank_a[rank]
    start_ns, end_ns = replay.a_start[call_first:call_end], replay.a_end[call_first:call_end]
    prev = model.a_prev[call_first:call_end]
    later = (prev >= 0).nonzero()[0]
    earlier = _local(prev[later], call_first)
    later_start_ns = start_ns[later]
    return bool(((later_start_ns >= end_ns[earlier]) & (later_start_ns > start_ns[earlier])).all())
