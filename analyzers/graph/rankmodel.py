"""One rank's part of the what-if model, built with vectorized lookups (all times int64 ns,
local indices). ``model.build_model`` joins the ranks; see its docstring for the rules.

Every "the last op launched before host time t on stream s" is one ``np.searchsorted`` per
stream over all the times asked about on it, never one call per time.
"""

from __future__ import annotations

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import (
    SYNC_EVENT_SYNC,
    SYNC_STREAM_SYNC,
    SYNC_STREAM_WAIT_EVENT,
    Timeline,
    groups,
    launch_calls,
    launch_times,
)
from profplug.analyzers.graph.dropset import DropSpec, dropped_calls
from profplug.analyzers.graph.host import sync_copies
from profplug.analyzers.steps import stats

QUEUE_TOL_NS = 2_000  # an op starting within this of its stream becoming ready was queued
MIN_NS = np.iinfo(np.int64).min
I64 = np.int64


def _last_by_key(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted keys, row of each) keeping, for a key listed twice, its last row (as a dict
    built in row order would)."""
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    last = np.concatenate((ks[1:] != ks[:-1], [True])) if ks.size else np.zeros(0, dtype=bool)
    return ks[last], order[last]


def _lookup(sorted_keys: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per query key, its row (``_last_by_key``), -1 when absent or negative."""
    if sorted_keys.size == 0:
        return np.full(q.size, -1, dtype=I64)
    k = np.minimum(np.searchsorted(sorted_keys, q), sorted_keys.size - 1)
    ok = (sorted_keys[k] == q) & (q >= 0)
    return np.where(ok, rows[k], -1)


class RankModel:
    """Model pieces for one rank: op order per stream, launch latency and queue gap, stream
    waits (``dep_op`` waits for ``dep_on``), what each host-blocking call waits for
    (``wait_call`` waits for ``wait_op``), its base cost and wake-up, the dropped calls."""

    def __init__(self, tl: Timeline, drop: DropSpec, memo: Memo | None = None) -> None:
        self.tl = tl
        n_a = tl.api_start_ns.size
        self.top = tl.api_tops()
        # the report's kinds: a top-level call is the strongest sync among itself and the
        # calls nested in it, a nested call none (classify.top_level_kinds)
        self.kind = classify.call_kinds(tl.names, tl.api_name, self.top, memo)
        self.is_top = self.top == np.arange(n_a)
        self.notes: list[str] = []  # trace-specific assumptions
        self.warns: list[str] = []
        self._link_ops(memo)
        self._stream_order()
        self._stream_waits()
        self._op_timing()
        self._blocking(drop, memo)

    # ---- ops <-> launching calls ----------------------------------------------------
    def _link_ops(self, memo: Memo | None) -> None:
        tl = self.tl
        self.o_api = launch_calls(tl, memo)
        self.launch = launch_times(tl, self.o_api)
        n_un = int((self.o_api < 0).sum())
        if n_un:
            self.warns.append(f"rank {tl.rank}: {n_un} GPU op(s) without a launching call in "
                              "the trace keep their recorded start")

    def _api_by_corr(self, corr: np.ndarray) -> np.ndarray:
        """Per correlation id, the API call that carries it (the first listed), -1 none."""
        tl = self.tl
        order = np.argsort(tl.api_corr, kind="stable")
        ks = tl.api_corr[order]
        if ks.size == 0:
            return np.full(corr.size, -1, dtype=I64)
        k = np.minimum(np.searchsorted(ks, corr), ks.size - 1)
        return np.where((ks[k] == corr) & (corr >= 0), order[k], -1)

    def _stream_order(self) -> None:
        tl = self.tl
        order = np.lexsort((tl.gpu_start_ns, tl.gpu_stream, tl.gpu_device))
        self.stream_order = order  # the ops stream by stream, each in order
        d, s = tl.gpu_device[order], tl.gpu_stream[order]
        new = (d[1:] != d[:-1]) | (s[1:] != s[:-1])  # a stream's first op (after the first)
        self.prev = np.full(tl.n_gpu, -1, dtype=I64)  # previous op on the same stream
        self.prev[order[1:][~new]] = order[:-1][~new]
        cuts = [0, *(np.nonzero(new)[0] + 1).tolist(), int(order.size)] if order.size else [0]
        keys = zip(d[cuts[:-1]].tolist(), s[cuts[:-1]].tolist(), strict=True)
        self.by_stream = {(int(dv), int(st)): order[a:b]
                          for (dv, st), a, b in zip(keys, cuts[:-1], cuts[1:], strict=True)}
        self.stream_launch = {k: np.maximum.accumulate(self.launch[v])
                              for k, v in self.by_stream.items()}

    def _per_stream(self, dev: np.ndarray, stream: np.ndarray, t: np.ndarray, before: bool,
                    ) -> np.ndarray:
        out = np.full(t.size, -1, dtype=I64)
        if t.size == 0:
            return out
        for key, sl in self.by_stream.items():
            rows = np.nonzero((dev == key[0]) & (stream == key[1]))[0]
            if rows.size == 0:
                continue
            if before:
                k = np.searchsorted(self.stream_launch[key], t[rows], side="left") - 1
                out[rows] = np.where(k >= 0, sl[np.maximum(k, 0)], -1)
            else:
                k = np.searchsorted(self.stream_launch[key], t[rows], side="right")
                out[rows] = np.where(k < sl.size, sl[np.minimum(k, sl.size - 1)], -1)
        return out

    def _last_before(self, dev: np.ndarray, stream: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Per query, the last op on (dev, stream) launched before host time ``t``; -1 none.
        One searchsorted per stream over all its queries."""
        return self._per_stream(dev, stream, t, True)

    def _first_after(self, dev: np.ndarray, stream: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Per query, the first op on (dev, stream) launched after host time ``t``; -1."""
        return self._per_stream(dev, stream, t, False)

    # ---- cudaStreamWaitEvent -> op dependencies ---------------------------------------
    def _stream_waits(self) -> None:
        tl = self.tl
        z = np.zeros(0, dtype=I64)
        self.dep_op, self.dep_on = z, z
        waits = np.nonzero(self.kind == classify.STREAM_WAIT)[0]
        if waits.size == 0:
            return
        g_sel = np.nonzero((tl.gsync_kind == SYNC_STREAM_WAIT_EVENT) & (tl.gsync_corr >= 0))[0]
        gk, gr = _last_by_key(tl.gsync_corr[g_sel])
        g = _lookup(gk, g_sel[gr] if gr.size else gr, tl.api_corr[waits])
        t = tl.api_start_ns[waits]
        has = g >= 0
        has[has] = tl.gsync_wait_stream[g[has]] >= 0
        waiter = np.full(waits.size, -1, dtype=I64)
        awaited = np.full(waits.size, -1, dtype=I64)
        if has.any():  # the GPU-side record names both streams
            gh = g[has]
            dev = tl.gsync_device[gh].astype(I64)
            rec = self._api_by_corr(tl.gsync_wait_corr[gh])
            t_rec = np.where(rec >= 0, tl.api_start_ns[np.maximum(rec, 0)], t[has])
            awaited[has] = self._last_before(dev, tl.gsync_wait_stream[gh].astype(I64), t_rec)
            waiter[has] = self._first_after(dev, tl.gsync_stream[gh].astype(I64), t[has])
        guess = ~has
        n_guess = int(guess.sum())
        if n_guess:  # no GPU-side record: the next op launched waits on the last op
            linked = np.nonzero(self.o_api >= 0)[0]  # launched on another stream
            by_launch = linked[np.argsort(self.launch[linked], kind="stable")]
            if by_launch.size:
                key = (tl.gpu_device[by_launch].astype(I64) * (1 << 32)
                       + tl.gpu_stream[by_launch].astype(I64))
                new_run = np.concatenate(([True], key[1:] != key[:-1]))
                run_start = np.maximum.accumulate(np.where(new_run, np.arange(key.size), 0))
                k = np.searchsorted(self.launch[by_launch], t[guess], side="right")
                ok = k < by_launch.size
                kk = np.minimum(k, by_launch.size - 1)
                j = run_start[kk] - 1
                waiter[guess] = np.where(ok, by_launch[kk], -1)
                awaited[guess] = np.where(ok & (j >= 0), by_launch[np.maximum(j, 0)], -1)
            part = g[guess] >= 0  # a GPU-side record, but not of the recorded stream
            n_part = int(part.sum())
            why = ("without a GPU-side record" if not n_part else
                   f"whose awaited stream the trace does not give ({n_part} with a GPU-side "
                   "record of the waiting stream only, as torch 2.11's Kineto writes them)")
            self.notes.append(
                f"rank {tl.rank}: {n_guess} cudaStreamWaitEvent call(s) {why}: assumed to make "
                "the next op launched wait for the last op launched on another stream")
        ok = (waiter >= 0) & (awaited >= 0)
        w, a = waiter[ok], awaited[ok]
        bad = tl.gpu_end_ns[a] > tl.gpu_start_ns[w] + QUEUE_TOL_NS  # the waiter ran first
        if bad.any():
            self.warns.append(f"rank {tl.rank}: {int(bad.sum())} stream wait(s) contradicted "
                              "by the trace's op order were left out")
        self.dep_op, self.dep_on = w[~bad], a[~bad]

    # ---- per-op launch latency and queue gap ------------------------------------------
    def _op_timing(self) -> None:
        tl = self.tl
        s, e = tl.gpu_start_ns, tl.gpu_end_ns
        has_prev = self.prev >= 0
        ready = np.where(has_prev, e[np.maximum(self.prev, 0)], MIN_NS)
        np.maximum.at(ready, self.dep_op, e[self.dep_on])
        has_ready = ready > MIN_NS
        slack = np.where(has_ready, s - ready, 0)
        queued = has_ready & (slack <= QUEUE_TOL_NS)
        obs = s - self.launch
        free = (self.o_api >= 0) & ~queued
        self.lat_cap = int(stats.median(obs[free])) if free.any() else 0
        # launched at least a typical latency before its stream was ready: the stream, not
        # the launch, set its start, however long after ready it came (a slow dispatch);
        # its time since the launch is a queue's wait, never a latency to replay
        queued |= has_ready & (ready - self.launch >= self.lat_cap)
        q_gap = slack[queued]
        g_typ = int(stats.median(np.maximum(q_gap, 0))) if q_gap.size else 0
        self.lat = np.where(queued, np.minimum(obs, self.lat_cap), obs)
        self.gap = np.where(queued, slack, np.minimum(g_typ, slack))
        self.gap[~has_ready] = 0

    # ---- host-blocking calls ------------------------------------------------------------
    def _waits_of(self, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """(call, op) pairs: what each blocking call waits for; and how many calls have no
        record of it."""
        tl = self.tl
        t = tl.api_start_ns[calls]
        dev_kind = self.kind[calls] == classify.DEVICE
        own = np.full(tl.api_start_ns.size, -1, dtype=I64)
        lk = np.nonzero(self.o_api >= 0)[0]
        own[self.o_api[lk]] = lk  # a blocking copy waits for its own copy
        c_list, o_list = [], []
        d = calls[dev_kind]
        td = tl.api_start_ns[d]
        for key, sl in self.by_stream.items():  # a device-wide sync: every stream's last op
            k = np.searchsorted(self.stream_launch[key], td, side="left") - 1
            c_list.append(d)
            o_list.append(np.where(k >= 0, sl[np.maximum(k, 0)], -1))
        rest = ~dev_kind
        mine = rest & (own[calls] >= 0)
        c_list.append(calls[mine])
        o_list.append(own[calls[mine]])
        other = rest & ~mine
        if not other.any():  # only device-wide syncs and blocking copies: no record to read
            wc, wo = np.concatenate(c_list), np.concatenate(o_list)
            keep = wo >= 0
            return wc[keep].astype(I64), wo[keep].astype(I64), 0
        g_sel = np.nonzero((tl.gsync_corr >= 0) & (tl.gsync_kind != SYNC_STREAM_WAIT_EVENT))[0]
        gk, gr = _last_by_key(tl.gsync_corr[g_sel])
        g = _lookup(gk, g_sel[gr] if gr.size else gr, tl.api_corr[calls[other]])
        gk_ = np.full(g.size, -1, dtype=I64)
        gk_[g >= 0] = tl.gsync_kind[g[g >= 0]]
        ss = gk_ == SYNC_STREAM_SYNC
        es = (gk_ == SYNC_EVENT_SYNC)
        if es.any():
            es[es] = tl.gsync_wait_stream[g[es]] >= 0
        oc = calls[other]
        if ss.any():
            gs = g[ss]
            c_list.append(oc[ss])
            o_list.append(self._last_before(tl.gsync_device[gs].astype(I64),
                                            tl.gsync_stream[gs].astype(I64), t[other][ss]))
        if es.any():
            ge = g[es]
            rec = self._api_by_corr(tl.gsync_wait_corr[ge])
            t_rec = np.where(rec >= 0, tl.api_start_ns[np.maximum(rec, 0)], t[other][es])
            c_list.append(oc[es])
            o_list.append(self._last_before(tl.gsync_device[ge].astype(I64),
                                            tl.gsync_wait_stream[ge].astype(I64), t_rec))
        wc = np.concatenate(c_list) if c_list else np.zeros(0, dtype=I64)
        wo = np.concatenate(o_list) if o_list else np.zeros(0, dtype=I64)
        keep = wo >= 0
        return wc[keep].astype(I64), wo[keep].astype(I64), int((~(ss | es)).sum())

    def _blocking(self, drop: DropSpec, memo: Memo | None) -> None:
        tl = self.tl
        n_a = tl.api_start_ns.size
        blocking = self.is_top & ((self.kind == classify.DEVICE) | (self.kind == classify.EVENT))
        copies = sync_copies(tl, self.o_api, self.is_top) & ~blocking
        if copies.any():
            self.notes.append(f"rank {tl.rank}: {int(copies.sum())} device-to-host copy call(s) "
                              "that return only once the copy is done wait for it")
        blocking |= copies
        self.blocking = blocking
        self.wait_call, self.wait_op, n_unknown = self._waits_of(np.nonzero(blocking)[0])
        if n_unknown:
            self.notes.append(f"rank {tl.rank}: {n_unknown} stream/event synchronize call(s) "
                              "with no record of what they wait for keep their recorded "
                              "duration")
        dur = tl.api_end_ns - tl.api_start_ns
        done = np.full(n_a, MIN_NS, dtype=I64)
        np.maximum.at(done, self.wait_call, tl.gpu_end_ns[self.wait_op])
        waits = done > MIN_NS
        blocked = waits & (done > tl.api_start_ns)
        wake = np.where(blocked, tl.api_end_ns - done, 0)
        self.base = dur.copy()
        self.omin = dur.copy()
        for _, sel in groups(tl.api_name, np.nonzero(blocking)[0]):  # per API name
            bs = blocked[sel]
            nbs = ~bs
            b, nb = sel[bs], sel[nbs]
            w_typ = int(stats.median(wake[b])) if b.size else 0
            cheap = dur[nb] if nb.size else wake[b]
            omin = max(int(cheap.min()), 0) if cheap.size else 0
            self.omin[sel] = omin
            self.base[b] = np.minimum(dur[b], omin)
            wnb = sel[waits[sel] & nbs]
            wake[wnb] = np.minimum(w_typ, tl.api_end_ns[wnb] - done[wnb])
        own_copy = np.zeros(n_a, dtype=bool)
        lk = self.o_api[self.o_api >= 0]
        own_copy[lk[blocking[lk]]] = True
        # a dropped synchronize is gone; a blocking copy still copies
        self.omin[blocking & ~own_copy] = 0
        self.wake = wake
        self.dropped = dropped_calls(tl, self.kind, blocking, drop, memo)
