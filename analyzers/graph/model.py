"""The dependency model of a run, built from every rank's timeline (all times ns: int64,
the delays int32 where they fit: ``_narrowed``).

The model holds, per node, the fixed delays of the run's timing rules; ``graph`` turns them
into edge arrays and ``simulate`` replays them. Every rule is "the latest of several
predecessor times plus a fixed delay":

- **host thread**: the top-level CUDA API calls (``tl.api_tops()``) in order; a call starts
  ``a_gap`` after the previous top-level call's end (the host time between them is kept);
  nested calls (a driver call inside a runtime call) move with their top-level call.
- **host-blocking call** (a synchronize, a blocking copy): its end is
  ``max(start + a_base, end of the ops it waits for + a_wake)``: a device-wide synchronize
  waits for the last op launched before it on every stream of the rank; a stream/event
  synchronize for the last op launched before it on the stream its GPU-side sync record
  names; a blocking memcpy, or a device-to-host copy into pageable memory, for its own copy.
  ``a_wake`` is the observed return latency after the awaited work ended. A dropped
  synchronize costs nothing, and the host work of its own range goes with it (``host``); a
  dropped blocking copy ends at ``start + a_omin``: the smallest observed cost of that API on
  that rank when not blocked. Any other call ends ``a_dur`` after its start.
- **GPU stream**: ops in recorded order; an op starts at ``max(launch + o_lat, previous op's
  end + o_gap, ends of the ops it waits for through cudaStreamWaitEvent + o_gap)``, where
  ``launch`` is its launching call's top-level call's start plus ``o_off``. ``o_lat`` and
  ``o_gap`` are observed per op (``o_lat`` capped at the rank's median launch latency when
  the op was queued, so a queued op is not delayed by how far ahead the host was).
- **NCCL**: a kernel matched across ranks (``pairs``, any number of ranks) ends
  ``max(own start, partner start - clock offset) + o_xfer``; any other op ends its recorded
  duration after its start.

With these rules the recorded run is a fixed point of the replay. Arrays ``a_*`` are per
API call, ``o_*`` per GPU op, over all ranks (global indices; ``rank_a``/``rank_o`` give
each rank's slice).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Any

import numpy as np
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline, groups
from profplug.analyzers.graph.dropset import DROP_ALL, DROP_DEVICE, DROP_NONE, DropSpec, resolve
from profplug.analyzers.graph.host import drop_cuts
from profplug.analyzers.graph.matching import Matching
from profplug.analyzers.graph.pairs import match_nccl
from profplug.analyzers.graph.rankmodel import QUEUE_TOL_NS, RankModel

__all__ = ["DROP_ALL", "DROP_DEVICE", "DROP_NONE", "QUEUE_TOL_NS", "DropSpec", "Model",
           "build_model", "coupled", "only", "replay_only"]


@dataclass
class Model:
    """Flat arrays over all ranks; ``a_*`` per API call, ``o_*`` per GPU op (global index)."""

    a_rank: np.ndarray
    a_start: np.ndarray  # recorded start ns
    a_end: np.ndarray
    a_dur: np.ndarray  # cost of a call that waits for nothing (recorded: end - start)
    a_top: np.ndarray  # top-level ancestor (itself when top-level)
    a_prev: np.ndarray  # top-level: the previous top-level call on its thread, -1 first
    a_gap: np.ndarray  # top-level: host time since the previous top-level call's end
    a_gap_drop: np.ndarray  # a_gap in the drop replay: less the dropped calls' host work
    a_base: np.ndarray  # the call's cost when it does not wait
    a_wake: np.ndarray  # return latency after the awaited work is done
    a_omin: np.ndarray  # cost when dropped (0 for a synchronize: the call is gone)
    a_blocking: np.ndarray  # bool: a host-blocking call (sync or blocking copy)
    a_dropped: np.ndarray  # bool: made non-blocking in the drop replay
    wait_call: np.ndarray  # (wait_call[k], wait_op[k]): blocking call waits for op
    wait_op: np.ndarray
    threads: list[np.ndarray]  # top-level calls per host thread, in order
    thread_key: list[tuple[int, int]]  # (rank, tid)
    o_rank: np.ndarray
    o_local: np.ndarray  # index of the op in its rank's timeline
    o_start: np.ndarray
    o_end: np.ndarray
    o_top: np.ndarray  # top-level call whose start (+ o_off) is the op's launch; -1 none
    o_off: np.ndarray  # launch - that call's start; unlinked: the recorded start
    o_lat: np.ndarray
    o_gap: np.ndarray
    o_prev: np.ndarray  # previous op on the same stream, -1 first
    o_peer: np.ndarray  # matched NCCL kernel on another rank, -1 none
    o_xfer: np.ndarray  # matched: time from the later start of the pair to this op's end
    o_clock: np.ndarray  # matched: peer clock minus this rank's clock (ns)
    dep_op: np.ndarray  # (dep_op[k], dep_on[k]): op waits for op (cudaStreamWaitEvent)
    dep_on: np.ndarray
    rank_a: dict[int, tuple[int, int]]  # rank -> [lo, hi) slice of api indices
    rank_o: dict[int, tuple[int, int]]
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # the ops stream by stream (each stream's ops in order, as o_prev chains them)
    o_order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # per call its top-level sync kind (classify.top_level_kinds: the stall analysis's own)
    a_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))

    @property
    def n_events(self) -> int:
        return int(self.a_start.size + self.o_start.size)


def _host_seqs(rm: RankModel) -> tuple[list[tuple[int, np.ndarray]], np.ndarray, np.ndarray,
                                       np.ndarray]:
    """Per thread its top-level calls in order; per call (local) the previous top-level call,
    the host gap before it, and that gap in the drop replay (ns)."""
    tl = rm.tl
    n_calls = tl.api_start_ns.size
    gap_ns = np.zeros(n_calls, dtype=np.int64)
    prev = np.full(n_calls, -1, dtype=np.int64)
    threads = []
    for tid, calls in groups(tl.api_tid, np.nonzero(rm.is_top)[0]):
        calls = calls[np.argsort(tl.api_start_ns[calls], kind="stable")]
        gap_ns[calls[1:]] = tl.api_start_ns[calls[1:]] - tl.api_end_ns[calls[:-1]]
        prev[calls[1:]] = calls[:-1]
        threads.append((tid, calls))
    # the cuts are non-zero only at dropped calls (``drop_cuts``): before a dropped call its
    # own ``pre``, after it (the next call on its thread) its ``post``, written in place
    # (no per-call temporary: the model's build is a worker's peak, docs/scale.md)
    cut_ns, post_ns = drop_cuts(tl, [calls for _, calls in threads], rm.dropped & rm.is_top)
    for _, calls in threads:
        at_dropped = np.flatnonzero(rm.dropped[calls[:-1]])
        cut_ns[calls[at_dropped + 1]] += post_ns[calls[at_dropped]]
    del post_ns
    gap_drop_ns = cut_ns  # the gap less the cut, in place of the cut
    np.subtract(gap_ns, cut_ns, out=gap_drop_ns)
    np.maximum(gap_drop_ns, 0, out=gap_drop_ns)
    return threads, prev, gap_ns, gap_drop_ns


def build_model(timelines: list[Timeline], drop: DropSpec | None = None, *,
                matching: Matching | None = None, memo: Memo | None = None) -> Model:
    """The dependency model of all ranks (see the module docstring); ``matching``: the NCCL
    kernels matched across the ranks with GPU work, when the caller has it. The ``policy``
    drop falls back to every device-wide synchronize when no rank has one in a pipeline
    send/recv (``dropset.resolve``; ``whatif`` also reports that). ``memo``: the caller's
    (``core.memo``), for what the model asks of each timeline more than once."""
    drop, _ = resolve(timelines, drop or DropSpec(), memo)
    rank_models = [RankModel(tl, drop, memo) for tl in timelines]
    m = _joined(timelines, rank_models, matching, memo)
    # the ranks' parts go first (the loops' names with them, in ``_joined``): each wide
    # array is then freed as its narrow copy is made
    del rank_models
    return _narrowed(m)


def _cat(parts: list[np.ndarray], dtype: type = np.int64) -> np.ndarray:
    """The ranks' parts of one array joined (one rank: its array as it is, read only: it may
    be the trace's)."""
    if len(parts) == 1:
        one = parts[0].view()
        one.flags.writeable = False
        return one
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _shift(x: np.ndarray, base: int) -> np.ndarray:
    """Local indices ``x`` (-1: none) made global by the rank's ``base``."""
    return x if base == 0 else np.where(x >= 0, x + base, -1)


def _plus(x: np.ndarray, base: int) -> np.ndarray:
    """Local indices ``x`` (none -1) made global by the rank's ``base``."""
    return x if base == 0 else x + base


@dataclass
class _Host:
    """The ranks' host threads joined (global call indices): per thread its top-level calls
    in order and its (rank, tid); per call the previous top-level call and the host gap
    before it (ns), as recorded and in the drop replay."""

    threads: list[np.ndarray]
    thread_key: list[tuple[int, int]]
    prev: np.ndarray
    gap: np.ndarray
    gap_drop: np.ndarray


def _host(rank_models: list[RankModel], a_base: list[int]) -> _Host:
    """The ranks' host threads joined (``a_base``: per rank its first call's global index)."""
    threads: list[np.ndarray] = []
    thread_key: list[tuple[int, int]] = []
    prevs, gaps, gaps_drop = [], [], []
    for i, rm in enumerate(rank_models):
        rank_threads, prev, gap, gap_drop = _host_seqs(rm)
        for tid, calls in rank_threads:
            threads.append(_plus(calls, a_base[i]))
            thread_key.append((rm.tl.rank, int(tid)))
        prevs.append(_shift(prev, a_base[i]))
        gaps.append(gap)
        gaps_drop.append(gap_drop)
    return _Host(threads, thread_key, _cat(prevs), _cat(gaps), _cat(gaps_drop))


def _launches(rank_models: list[RankModel], a_base: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per op (global), the top-level call that launched it (global index, -1: none) and its
    launch offset (ns): its launching call's start to its launch; an op no call launched:
    its recorded start."""
    o_top, o_off = [], []
    for i, rm in enumerate(rank_models):
        linked = rm.o_api >= 0
        top = np.full(rm.o_api.size, -1, dtype=np.int64)
        top[linked] = rm.top[rm.o_api[linked]]
        off = rm.tl.gpu_start_ns.copy()
        off[linked] = rm.launch[linked] - rm.tl.api_start_ns[top[linked]]
        o_top.append(_shift(top, a_base[i]))
        o_off.append(off)
    return _cat(o_top), _cat(o_off)


def _nccl(timelines: list[Timeline], o_start: np.ndarray, o_end: np.ndarray, o_base: list[int],
          notes: list[str], warns: list[str], matching: Matching | None, memo: Memo | None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op (global): its matched NCCL partner (-1: none), the clock offset (ns) and the
    transfer (ns). Matched NCCL kernels end together (the transfer completes on both sides);
    the clock offset: the partner's clock minus this rank's (pairs.py), so only durations
    and order are used."""
    peer, clock = match_nccl(timelines, o_base, int(o_start.size), notes, warns, matching,
                             memo)
    paired = peer >= 0
    clock, xfer, n_late = coupled(o_start, o_end, o_start[np.maximum(peer, 0)], paired, clock)
    if n_late:
        notes.append(f"{n_late} NCCL kernel(s) ended before their partner started "
                     "on the aligned clock: each such pair's clock offset is taken so that the "
                     "partner started as the kernel ended")
    return peer, clock, xfer


def _joined(timelines: list[Timeline], rank_models: list[RankModel], matching: Matching | None,
            memo: Memo | None) -> Model:
    """The ranks' parts joined into one :class:`Model` (global indices), not narrowed."""
    a_base = np.cumsum([0] + [rm.tl.api_start_ns.size for rm in rank_models]).tolist()
    o_base = np.cumsum([0] + [rm.tl.n_gpu for rm in rank_models]).tolist()
    notes = [n for rm in rank_models for n in rm.notes]
    warns = [n for rm in rank_models for n in rm.warns]
    host = _host(rank_models, a_base)
    o_top, o_off = _launches(rank_models, a_base)
    o_start = _cat([rm.tl.gpu_start_ns for rm in rank_models])
    o_end = _cat([rm.tl.gpu_end_ns for rm in rank_models])
    peer, clock, xfer = _nccl(timelines, o_start, o_end, o_base, notes, warns, matching, memo)
    return Model(
        a_rank=_cat([_same(rm.tl.api_start_ns.size, rm.tl.rank) for rm in rank_models]),
        a_start=_cat([rm.tl.api_start_ns for rm in rank_models]),
        a_end=_cat([rm.tl.api_end_ns for rm in rank_models]),
        a_dur=_cat([rm.tl.api_end_ns - rm.tl.api_start_ns for rm in rank_models]),
        a_top=_cat([_plus(rm.top, a_base[i]) for i, rm in enumerate(rank_models)]),
        a_prev=host.prev, a_gap=host.gap, a_gap_drop=host.gap_drop,
        a_base=_cat([rm.base for rm in rank_models]),
        a_wake=_cat([rm.wake for rm in rank_models]),
        a_omin=_cat([rm.omin for rm in rank_models]),
        a_blocking=_cat([rm.blocking for rm in rank_models], bool),
        a_dropped=_cat([rm.dropped for rm in rank_models], bool),
        wait_call=_cat([_plus(rm.wait_call, a_base[i]) for i, rm in enumerate(rank_models)]),
        wait_op=_cat([_plus(rm.wait_op, o_base[i]) for i, rm in enumerate(rank_models)]),
        threads=host.threads, thread_key=host.thread_key,
        o_rank=_cat([_same(rm.tl.n_gpu, rm.tl.rank) for rm in rank_models]),
        o_local=_cat([np.arange(rm.tl.n_gpu) for rm in rank_models]),
        o_start=o_start, o_end=o_end, o_top=o_top, o_off=o_off,
        o_lat=_cat([rm.lat for rm in rank_models]), o_gap=_cat([rm.gap for rm in rank_models]),
        o_prev=_cat([_shift(rm.prev, o_base[i]) for i, rm in enumerate(rank_models)]),
        o_peer=peer, o_xfer=xfer, o_clock=clock,
        dep_op=_cat([_plus(rm.dep_op, o_base[i]) for i, rm in enumerate(rank_models)]),
        dep_on=_cat([_plus(rm.dep_on, o_base[i]) for i, rm in enumerate(rank_models)]),
        rank_a={rm.tl.rank: (a_base[i], a_base[i + 1]) for i, rm in enumerate(rank_models)},
        rank_o={rm.tl.rank: (o_base[i], o_base[i + 1]) for i, rm in enumerate(rank_models)},
        assumptions=notes, warnings=warns,
        o_order=_cat([_plus(rm.stream_order, o_base[i]) for i, rm in enumerate(rank_models)]),
        a_kind=_cat([rm.kind for rm in rank_models], np.int8))


def _same(n: int, value: int) -> np.ndarray:
    """``n`` times ``value`` (int64), as a read-only view of one number."""
    return np.broadcast_to(np.int64(value), (n,))


def _narrowed(m: Model) -> Model:
    """``m`` with its index arrays in 4 bytes where every node id fits (``events.node_ids``),
    and each delay array (``_DELAYS``) in 4 bytes where all its values are under 2^30 ns
    (~1.07 s) in magnitude, so that the sum of two never overflows: a worker holds one
    rank's model beside its graph (docs/scale.md). Whoever adds three or more of them, or
    writes into one, casts to int64 first (the graph's weights are int64)."""
    for k in _DELAYS:
        a = getattr(m, k)
        if a.dtype == np.int64 and a.size and max(-int(a.min()), int(a.max())) < _DELAY_MAX:
            setattr(m, k, a.astype(np.int32))
    if 2 * m.a_start.size + 2 * m.o_start.size + 1 >= 2**31:
        return m
    for k in (*_INDICES, "wait_call", "wait_op", "dep_op", "dep_on"):
        a = getattr(m, k)
        if a.dtype == np.int64:
            setattr(m, k, a.astype(np.int32))
    m.threads = [t.astype(np.int32) if t.dtype == np.int64 else t for t in m.threads]
    return m


# the model's per-call and per-op delays (ns), each narrowed to int32 when it fits
_DELAYS = ("a_dur", "a_gap", "a_gap_drop", "a_base", "a_wake", "a_omin", "o_off", "o_lat",
           "o_gap", "o_xfer", "o_clock")
_DELAY_MAX = 2**30


# what the graph holds once built (``events.build_graph``): the replays and the per-rank
# results read none of them
def coupled(o_start: np.ndarray, o_end: np.ndarray, p_start: np.ndarray, paired: np.ndarray,
            clock: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per op, its clock offset to its partner and its transfer (ns), and how many ended
    before their partner started. ``p_start``: the partner's recorded start (any value where
    not ``paired``); ``clock``: the partner's clock minus the op's (``pairs.match_nccl``).
    A partner that started (on the aligned clock) after the kernel ended: the clocks or the
    pairing are off by that much for this pair; its offset is taken so that the partner
    started as the kernel ended, and the recorded run stays a fixed point. The transfer
    runs from the later of the two starts to the op's end."""
    late = paired & (p_start - clock > o_end)
    if late.any():
        clock = np.where(late, p_start - o_end, clock)
    later = np.maximum(o_start, p_start - clock)
    return clock, np.where(paired, np.maximum(o_end - later, 0), 0), int(late.sum())


_IN_GRAPH = ("a_rank", "a_dur", "a_prev", "a_gap", "a_gap_drop", "a_base", "a_wake", "a_omin",
             "a_blocking", "wait_call", "wait_op", "o_top", "o_off", "o_lat", "o_gap", "o_xfer",
             "o_clock", "dep_op", "dep_on")


def replay_only(m: Model, keep: tuple[str, ...] = ()) -> Model:
    """``m`` without the arrays that only its graph is built from (``_IN_GRAPH``: ~70 of
    its ~100 bytes per event), once its graphs are built: what ``simulate.replay`` on a
    given graph and the what-if's per-rank results read stays, and ``keep`` (e.g. what
    ``events.dropped_graph`` reads: ``a_gap_drop``, ``a_omin``). The client's memory is the
    limit of a run-level what-if (docs/scale.md)."""
    emptied: dict[str, Any] = {name: _empty(getattr(m, name).dtype) for name in _IN_GRAPH
                               if name not in keep}
    return replace(m, **emptied)


def only(m: Model, keep: tuple[str, ...]) -> Model:
    """``m`` with only the arrays named in ``keep`` (``threads`` among them: its thread
    lists), the rest empty: for a pass that reads a few of them, such as a worker's
    reductions (``rounds.REDUCE_READS``), once the graph is built (a worker's peak:
    docs/scale.md)."""
    emptied: dict[str, Any] = {
        f.name: _empty(value.dtype) for f in fields(m)
        if isinstance(value := getattr(m, f.name), np.ndarray) and f.name not in keep}
    if "threads" not in keep:
        emptied["threads"], emptied["thread_key"] = [], []
    return replace(m, **emptied)


# the model's index arrays that a replay and the per-rank results read (-1: none)
_INDICES = ("a_top", "a_prev", "o_top", "o_prev", "o_peer", "o_order", "o_local")


@cache
def _empty(dtype: np.dtype) -> np.ndarray:
    """A shared, read-only empty array of ``dtype`` (nothing in it to write)."""
    out = np.zeros(0, dtype=dtype)
    out.flags.writeable = False
    return out
