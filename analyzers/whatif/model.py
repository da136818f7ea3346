"""The dependency model of a run, built from every rank's timeline (all times int64 ns).

Host side, per thread: the top-level CUDA API calls in order, with the host time between one
call's end and the next call's start kept fixed (``a_gap``). Calls nested in another call
(a driver call inside a runtime call) move with their top-level call (``a_top``, offset).
A host-blocking call waits for a set of GPU ops (``a_wait``): a device-wide synchronize for
the last op launched before it on every stream of the rank; a stream/event synchronize for
the last op launched before it on the stream named by its GPU-side sync record; a blocking
memcpy, or a device-to-host copy into pageable memory, for its own copy. Its end is
``max(start + base, done + wake)`` where ``wake`` is the observed return latency after the
awaited work ended. A dropped synchronize costs nothing, and the host work of its own range
goes with it (``host``); a dropped blocking copy ends at ``start + overhead``: the smallest
observed cost of that API on that rank when not blocked.

GPU side, per stream: ops in recorded order. An op starts at
``max(launch + lat, ready + gap)`` where ``launch`` is its launching call's start, ``ready``
the later of the previous op's end on its stream and the ends of the ops it waits for through
``cudaStreamWaitEvent``; ``lat``/``gap`` are observed per op (``lat`` capped at the rank's
median launch latency when the op was queued, so a queued op is not delayed by how far ahead
the host was). NCCL kernels matched across ranks (``pairs``, any number of ranks) end ``T``
after the later of the pair starts.
With these rules the recorded run is a fixed point of the replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import classify
from ..callsites import enclosing
from ..timeline import (
    SYNC_EVENT_SYNC,
    SYNC_STREAM_SYNC,
    SYNC_STREAM_WAIT_EVENT,
    Timeline,
    groups,
    launch_calls,
    launch_times,
)
from .dropset import DROP_POLICY, policy_mask
from .host import drop_cuts, sync_copies
from .pairs import match_nccl

QUEUE_TOL_NS = 2_000  # an op starting within this of its stream becoming ready was queued
DROP_DEVICE, DROP_ALL = "device-sync", "all-sync"
DROP_NONE = "none"  # nothing dropped: the replay as recorded (``--unprofiled`` calibration)
NONE_I = -1


@dataclass
class DropSpec:
    """Which host-blocking calls the replay makes non-blocking."""

    kinds: str = DROP_POLICY  # policy (dropset.py) | device-sync | all-sync | none
    callsite: str | None = None  # only calls at this call site (callsites.enclosing label)


@dataclass
class Model:
    """Flat arrays over all ranks; ``a_*`` per API call, ``o_*`` per GPU op (global index)."""

    a_rank: np.ndarray
    a_start: np.ndarray  # recorded start ns
    a_end: np.ndarray
    a_dur: np.ndarray  # cost of a call that waits for nothing (recorded: end - start)
    a_top: np.ndarray  # top-level ancestor (itself when top-level)
    a_gap: np.ndarray  # top-level: host time since the previous top-level call's end
    a_gap_drop: np.ndarray  # a_gap in the drop replay: less the dropped calls' host work
    a_base: np.ndarray  # the call's cost when it does not wait
    a_wake: np.ndarray  # return latency after the awaited work is done
    a_omin: np.ndarray  # cost when dropped (0 for a synchronize: the call is gone)
    a_blocking: np.ndarray  # bool: a host-blocking sync call (DEVICE or EVENT kind)
    a_dropped: np.ndarray  # bool: made non-blocking in the drop replay
    a_wait: dict[int, list[int]]  # top-level blocking call -> ops it waits for
    threads: list[list[int]]  # top-level calls per host thread, in order
    thread_key: list[tuple[int, int]]  # (rank, tid)
    o_rank: np.ndarray
    o_start: np.ndarray
    o_end: np.ndarray
    o_top: np.ndarray  # top-level call whose start (+ o_off) is the op's launch; -1 none
    o_off: np.ndarray
    o_lat: np.ndarray
    o_gap: np.ndarray
    o_peer: np.ndarray  # matched NCCL kernel on another rank, -1 none
    o_xfer: np.ndarray  # matched: time from the later start of the pair to this op's end
    o_clock: np.ndarray  # matched: peer clock minus this rank's clock (ns)
    o_deps: dict[int, list[int]]  # op -> ops it waits for (stream waits)
    streams: list[list[int]]
    stream_key: list[tuple[int, int, int]]  # (rank, device, stream)
    rank_a: dict[int, tuple[int, int]]  # rank -> [lo, hi) slice of api indices
    rank_o: dict[int, tuple[int, int]]
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def n_events(self) -> int:
        return int(self.a_start.size + self.o_start.size)


class _RankBuilder:
    """Model pieces for one rank, with local indices."""

    def __init__(self, tl: Timeline, drop: DropSpec) -> None:
        self.tl = tl
        n_a = tl.api_start_ns.size
        kinds = classify.kinds_for_symbols(tl.names)
        self.kind = kinds[tl.api_name] if n_a else np.zeros(0, dtype=np.int8)
        self.top = tl.api_tops()
        self.is_top = self.top == np.arange(n_a)
        self.notes: list[str] = []  # trace-specific assumptions
        self.warns: list[str] = []
        self._link_ops()
        self._stream_order()
        self._stream_waits()
        self._op_timing()
        self._blocking(drop)

    # ---- ops <-> launching calls ----------------------------------------------------
    def _link_ops(self) -> None:
        tl = self.tl
        self.o_api = launch_calls(tl)
        self.launch = launch_times(tl, self.o_api)
        linked = self.o_api >= 0
        if (~linked).any():
            self.warns.append(f"rank {tl.rank}: {int((~linked).sum())} GPU op(s) without a "
                              "launching call in the trace keep their recorded start")

    def _stream_order(self) -> None:
        tl = self.tl
        order = np.lexsort((tl.gpu_start_ns, tl.gpu_stream, tl.gpu_device))
        self.order = order
        d, s = tl.gpu_device[order], tl.gpu_stream[order]
        brk = np.nonzero((np.diff(d) != 0) | (np.diff(s) != 0))[0] + 1
        self.stream_slices = np.split(order, brk) if order.size else []
        self.prev = np.full(tl.n_gpu, -1, dtype=np.int64)  # previous op on the same stream
        for sl in self.stream_slices:
            self.prev[sl[1:]] = sl[:-1]
        self.by_stream = {(int(tl.gpu_device[sl[0]]), int(tl.gpu_stream[sl[0]])): sl
                          for sl in self.stream_slices}
        self.stream_launch = {k: np.maximum.accumulate(self.launch[v])
                              for k, v in self.by_stream.items()}

    def _last_before(self, dev: int, stream: int, t: int) -> int:
        """The last op on (dev, stream) launched before host time ``t``; -1 none."""
        sl = self.by_stream.get((dev, stream))
        if sl is None:
            return -1
        k = int(np.searchsorted(self.stream_launch[(dev, stream)], t, side="left")) - 1
        return int(sl[k]) if k >= 0 else -1

    def _api_by_corr(self, corr: int) -> int:
        if not hasattr(self, "_corr_order"):
            self._corr_order = np.argsort(self.tl.api_corr, kind="stable")
            self._corr_sorted = self.tl.api_corr[self._corr_order]
        k = int(np.searchsorted(self._corr_sorted, corr))
        if corr < 0 or k >= self._corr_sorted.size or self._corr_sorted[k] != corr:
            return -1
        return int(self._corr_order[k])

    # ---- cudaStreamWaitEvent -> op dependencies ---------------------------------------
    def _stream_waits(self) -> None:
        tl = self.tl
        self.deps: dict[int, list[int]] = {}
        waits = np.nonzero(self.kind == classify.STREAM_WAIT)[0]
        if waits.size == 0:
            return
        g_sel = np.nonzero(tl.gsync_kind == SYNC_STREAM_WAIT_EVENT)[0]
        g_by_corr = {int(tl.gsync_corr[g]): int(g) for g in g_sel if tl.gsync_corr[g] >= 0}
        linked_ops = np.nonzero(self.o_api >= 0)[0]
        by_launch = linked_ops[np.argsort(self.launch[linked_ops], kind="stable")]
        l_sorted = self.launch[by_launch]
        n_link = n_guess = n_bad = 0
        for i in waits:
            t = int(tl.api_start_ns[i])
            g = g_by_corr.get(int(tl.api_corr[i]))
            waiter = awaited = -1
            if g is not None and tl.gsync_wait_stream[g] >= 0:
                dev, st = int(tl.gsync_device[g]), int(tl.gsync_stream[g])
                rec = self._api_by_corr(int(tl.gsync_wait_corr[g]))
                t_rec = int(tl.api_start_ns[rec]) if rec >= 0 else t
                awaited = self._last_before(dev, int(tl.gsync_wait_stream[g]), t_rec)
                sl = self.by_stream.get((dev, st))
                if sl is not None:
                    k = int(np.searchsorted(self.stream_launch[(dev, st)], t, side="right"))
                    waiter = int(sl[k]) if k < sl.size else -1
                n_link += 1
            else:  # no GPU-side record: the next op launched waits on the last op launched
                k = int(np.searchsorted(l_sorted, t, side="right"))  # on another stream
                if k < l_sorted.size:
                    waiter = int(by_launch[k])
                    key = (int(tl.gpu_device[waiter]), int(tl.gpu_stream[waiter]))
                    j = k - 1
                    while j >= 0 and (int(tl.gpu_device[by_launch[j]]),
                                      int(tl.gpu_stream[by_launch[j]])) == key:
                        j -= 1
                    awaited = int(by_launch[j]) if j >= 0 else -1
                n_guess += 1
            if waiter < 0 or awaited < 0:
                continue
            if tl.gpu_end_ns[awaited] > tl.gpu_start_ns[waiter] + QUEUE_TOL_NS:
                n_bad += 1  # the trace says the waiter ran first: not this dependency
                continue
            self.deps.setdefault(waiter, []).append(awaited)
        if n_guess:
            self.notes.append(
                f"rank {tl.rank}: {n_guess} cudaStreamWaitEvent call(s) without a GPU-side "
                "record: assumed to make the next op launched wait for the last op launched "
                "on another stream")
        if n_bad:
            self.warns.append(f"rank {tl.rank}: {n_bad} stream wait(s) contradicted by the "
                              "trace's op order were left out")

    # ---- per-op launch latency and queue gap ------------------------------------------
    def _op_timing(self) -> None:
        tl = self.tl
        s, e = tl.gpu_start_ns, tl.gpu_end_ns
        has_prev = self.prev >= 0
        ready = np.where(has_prev, e[np.maximum(self.prev, 0)], np.iinfo(np.int64).min)
        for w, deps in self.deps.items():
            ready[w] = max(int(ready[w]), *(int(e[d]) for d in deps))
        has_ready = ready > np.iinfo(np.int64).min
        slack = np.where(has_ready, s - ready, 0)
        queued = has_ready & (slack <= QUEUE_TOL_NS)
        obs = s - self.launch
        linked = self.o_api >= 0
        free = linked & ~queued
        self.lat_cap = int(np.median(obs[free])) if free.any() else 0
        q_gap = slack[queued]
        g_typ = int(np.median(np.maximum(q_gap, 0))) if q_gap.size else 0
        self.lat = np.where(queued, np.minimum(obs, self.lat_cap), obs)
        self.gap = np.where(queued, slack, np.minimum(g_typ, slack))
        self.gap[~has_ready] = 0

    # ---- host-blocking calls ------------------------------------------------------------
    def _blocking(self, drop: DropSpec) -> None:
        tl = self.tl
        n_a = tl.api_start_ns.size
        blocking = self.is_top & ((self.kind == classify.DEVICE) | (self.kind == classify.EVENT))
        copies = sync_copies(tl, self.o_api, self.is_top) & ~blocking
        if copies.any():
            self.notes.append(f"rank {tl.rank}: {int(copies.sum())} device-to-host copy call(s) "
                              "that return only once the copy is done wait for it")
        blocking |= copies
        self.blocking = blocking
        self.wait: dict[int, list[int]] = {}
        own = {int(a): int(o) for o, a in enumerate(self.o_api) if a >= 0 and blocking[a]}
        g_by_corr = {int(tl.gsync_corr[g]): int(g) for g in range(tl.gsync_corr.size)
                     if tl.gsync_corr[g] >= 0 and tl.gsync_kind[g] != SYNC_STREAM_WAIT_EVENT}
        n_unknown = 0
        for i in np.nonzero(blocking)[0]:
            i = int(i)
            t = int(tl.api_start_ns[i])
            if self.kind[i] == classify.DEVICE:
                ops = [self._last_before(d, st, t) for d, st in self.by_stream]
            elif i in own:
                ops = [own[i]]
            else:
                g = g_by_corr.get(int(tl.api_corr[i]))
                ops = []
                if g is not None and tl.gsync_kind[g] == SYNC_STREAM_SYNC:
                    ops = [self._last_before(int(tl.gsync_device[g]), int(tl.gsync_stream[g]), t)]
                elif g is not None and tl.gsync_kind[g] == SYNC_EVENT_SYNC \
                        and tl.gsync_wait_stream[g] >= 0:
                    rec = self._api_by_corr(int(tl.gsync_wait_corr[g]))
                    t_rec = int(tl.api_start_ns[rec]) if rec >= 0 else t
                    ops = [self._last_before(int(tl.gsync_device[g]),
                                             int(tl.gsync_wait_stream[g]), t_rec)]
                else:
                    n_unknown += 1
            ops = [o for o in ops if o >= 0]
            if ops:
                self.wait[i] = ops
        if n_unknown:
            self.notes.append(f"rank {tl.rank}: {n_unknown} stream/event synchronize call(s) "
                              "with no record of what they wait for keep their recorded "
                              "duration")
        dur = tl.api_end_ns - tl.api_start_ns
        done = np.full(n_a, np.iinfo(np.int64).min, dtype=np.int64)
        for i, ops in self.wait.items():
            done[i] = max(int(tl.gpu_end_ns[o]) for o in ops)
        waits = done > np.iinfo(np.int64).min
        blocked = waits & (done > tl.api_start_ns)
        wake = np.where(blocked, tl.api_end_ns - done, 0)
        self.base = dur.copy()
        self.omin = dur.copy()
        for _, sel in groups(tl.api_name, np.nonzero(blocking)[0]):  # per API name
            b, nb = sel[blocked[sel]], sel[~blocked[sel]]
            w_typ = int(np.median(wake[b])) if b.size else 0
            cheap = dur[nb] if nb.size else wake[b]
            omin = max(int(cheap.min()), 0) if cheap.size else 0
            self.omin[sel] = omin
            self.base[b] = np.minimum(dur[b], omin)
            wnb = sel[waits[sel] & ~blocked[sel]]
            wake[wnb] = np.minimum(w_typ, tl.api_end_ns[wnb] - done[wnb])
        sync_only = blocking.copy()
        sync_only[list(own)] = False
        self.omin[sync_only] = 0  # a dropped synchronize is gone; a blocking copy still copies
        self.wake = wake
        self.dropped = np.zeros(n_a, dtype=bool)
        want = classify.DEVICE if drop.kinds == DROP_DEVICE else -1
        cand = blocking & ((self.kind == want) if want >= 0 else drop.kinds != DROP_NONE)
        if drop.kinds == DROP_POLICY:
            cand = blocking & policy_mask(tl)
        if drop.callsite is not None and cand.any():
            idx = np.nonzero(cand)[0]
            labels = enclosing(tl, tl.api_start_ns[idx], tl.api_end_ns[idx], tl.api_tid[idx])
            cand[idx[np.array([lab != drop.callsite for lab in labels], dtype=bool)]] = False
        self.dropped = cand


def _op_tops(b: _RankBuilder, base: int) -> np.ndarray:
    """Per op: the model index of its launch's top-level call, -1 when unlinked (a rank
    without host API calls has no call to index)."""
    out = np.full(b.o_api.size, -1, dtype=np.int64)
    linked = b.o_api >= 0
    out[linked] = b.top[b.o_api[linked]] + base
    return out


def _launch_offsets(b: _RankBuilder) -> np.ndarray:
    """Per op: launch time minus its top-level call's start; unlinked ops: recorded start."""
    out = b.tl.gpu_start_ns.copy()
    linked = b.o_api >= 0
    if linked.any():
        out[linked] = b.launch[linked] - b.tl.api_start_ns[b.top[b.o_api[linked]]]
    return out


def build_model(timelines: list[Timeline], drop: DropSpec | None = None) -> Model:
    """The dependency model of all ranks (see the module docstring)."""
    drop = drop or DropSpec()
    builders = [_RankBuilder(tl, drop) for tl in timelines]
    a_base = np.cumsum([0] + [b.tl.api_start_ns.size for b in builders]).tolist()
    o_base = np.cumsum([0] + [b.tl.n_gpu for b in builders]).tolist()
    notes = [n for b in builders for n in b.notes]
    warns = [n for b in builders for n in b.warns]
    cat = np.concatenate
    a_top = cat([b.top + a_base[k] for k, b in enumerate(builders)]) if builders else \
        np.zeros(0, dtype=np.int64)
    threads: list[list[int]] = []
    thread_key: list[tuple[int, int]] = []
    gaps, gaps_drop = [], []
    for k, b in enumerate(builders):
        tl = b.tl
        gap = np.zeros(tl.api_start_ns.size, dtype=np.int64)
        tops = np.nonzero(b.is_top)[0]
        seqs = []
        for t, seq in groups(tl.api_tid, tops):
            seq = seq[np.argsort(tl.api_start_ns[seq], kind="stable")]
            gap[seq[1:]] = tl.api_start_ns[seq[1:]] - tl.api_end_ns[seq[:-1]]
            seqs.append(seq)
            threads.append((seq + a_base[k]).tolist())
            thread_key.append((tl.rank, int(t)))
        pre, post = drop_cuts(tl, seqs, b.dropped & b.is_top)
        cut = np.where(b.dropped, pre, 0)
        for seq in seqs:
            cut[seq[1:]] += np.where(b.dropped[seq[:-1]], post[seq[:-1]], 0)
        gaps.append(gap)
        gaps_drop.append(np.maximum(gap - cut, 0))
    o_top = cat([_op_tops(b, a_base[k]) for k, b in enumerate(builders)])
    o_off = cat([_launch_offsets(b) for b in builders])
    streams, stream_key = [], []
    for k, b in enumerate(builders):
        for (dev, st), sl in b.by_stream.items():
            streams.append((sl + o_base[k]).tolist())
            stream_key.append((b.tl.rank, dev, st))
    o_start = cat([b.tl.gpu_start_ns for b in builders])
    o_end = cat([b.tl.gpu_end_ns for b in builders])
    # Matched NCCL kernels end together (the transfer completes on both sides); ``clock``:
    # the partner's clock minus this rank's (pairs.py), so only durations and order are used.
    peer, clock = match_nccl(timelines, o_base, int(o_start.size), notes, warns)
    paired = peer >= 0
    pk = np.maximum(peer, 0)
    later = np.maximum(o_start, o_start[pk] - clock)
    xfer = np.where(paired, np.maximum(o_end - later, 0), 0)
    return Model(
        a_rank=cat([np.full(b.tl.api_start_ns.size, b.tl.rank) for b in builders]),
        a_start=cat([b.tl.api_start_ns for b in builders]),
        a_end=cat([b.tl.api_end_ns for b in builders]),
        a_dur=cat([b.tl.api_end_ns - b.tl.api_start_ns for b in builders]),
        a_top=a_top, a_gap=cat(gaps), a_gap_drop=cat(gaps_drop),
        a_base=cat([b.base for b in builders]),
        a_wake=cat([b.wake for b in builders]), a_omin=cat([b.omin for b in builders]),
        a_blocking=cat([b.blocking for b in builders]),
        a_dropped=cat([b.dropped for b in builders]),
        a_wait={i + a_base[k]: [o + o_base[k] for o in v]
                for k, b in enumerate(builders) for i, v in b.wait.items()},
        threads=threads, thread_key=thread_key,
        o_rank=cat([np.full(b.tl.n_gpu, b.tl.rank) for b in builders]),
        o_start=o_start, o_end=o_end, o_top=o_top, o_off=o_off,
        o_lat=cat([b.lat for b in builders]), o_gap=cat([b.gap for b in builders]),
        o_peer=peer, o_xfer=xfer, o_clock=clock,
        o_deps={w + o_base[k]: [d + o_base[k] for d in v]
                for k, b in enumerate(builders) for w, v in b.deps.items()},
        streams=streams, stream_key=stream_key,
        rank_a={b.tl.rank: (a_base[k], a_base[k + 1]) for k, b in enumerate(builders)},
        rank_o={b.tl.rank: (o_base[k], o_base[k + 1]) for k, b in enumerate(builders)},
        assumptions=notes, warnings=warns)
