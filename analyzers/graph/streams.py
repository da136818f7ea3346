"""A rank's GPU ops stream by stream, and the lookups the what-if's model makes by
correlation id (all times int64 ns, local indices).

Every "the last op launched before host time t on stream s" is one ``np.searchsorted`` per
stream over all the times asked about on it, never one call per time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core.timeline import SYNC_STREAM_WAIT_EVENT, Timeline

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


@dataclass(frozen=True)
class Streams:
    """A rank's GPU ops stream by stream: ``order`` (every op, stream by stream, each in start
    order), ``prev`` (per op the previous op on its stream, -1 first), and per (device,
    stream) its ops in order (``ops``) and the running maximum of their launch times
    (``launch_reach_ns``: ascending, so searchable)."""

    order: np.ndarray
    prev: np.ndarray
    ops: dict[tuple[int, int], np.ndarray]
    launch_reach_ns: dict[tuple[int, int], np.ndarray]

    def last_launched_before(
        self, device: np.ndarray, stream: np.ndarray, t_ns: np.ndarray
    ) -> np.ndarray:
        """Per query, the last op on (device, stream) launched before host time ``t_ns``; -1
        none. One searchsorted per stream over all its queries."""
        found = np.full(t_ns.size, -1, dtype=I64)
        if t_ns.size == 0:
            return found
        for key, ops, rows in self._queries_by_stream(device, stream):
            k = np.searchsorted(self.launch_reach_ns[key], t_ns[rows], side="left") - 1
            found[rows] = np.where(k >= 0, ops[np.maximum(k, 0)], -1)
        return found

    def first_launched_after(
        self, device: np.ndarray, stream: np.ndarray, t_ns: np.ndarray
    ) -> np.ndarray:
        """Per query, the first op on (device, stream) launched after host time ``t_ns``; -1
        none."""
        found = np.full(t_ns.size, -1, dtype=I64)
        if t_ns.size == 0:
            return found
        for key, ops, rows in self._queries_by_stream(device, stream):
            k = np.searchsorted(self.launch_reach_ns[key], t_ns[rows], side="right")
            found[rows] = np.where(k < ops.size, ops[np.minimum(k, ops.size - 1)], -1)
        return found

    def _queries_by_stream(
        self, device: np.ndarray, stream: np.ndarray
    ) -> Iterator[tuple[tuple[int, int], np.ndarray, np.ndarray]]:
        """Per stream with queries: its key, its ops, the queries' rows."""
        for key, ops in self.ops.items():
            rows = np.nonzero((device == key[0]) & (stream == key[1]))[0]
            if rows.size:
                yield key, ops, rows


def rank_streams(tl: Timeline, launch_ns: np.ndarray) -> Streams:
    """The rank's :class:`Streams` (``launch_ns``: each op's launch time)."""
    order = np.lexsort((tl.gpu_start_ns, tl.gpu_stream, tl.gpu_device))
    device, stream = tl.gpu_device[order], tl.gpu_stream[order]
    first = (device[1:] != device[:-1]) | (stream[1:] != stream[:-1])  # a stream's first op
    prev = np.full(tl.n_gpu, -1, dtype=I64)
    prev[order[1:][~first]] = order[:-1][~first]
    cuts = [0, *(np.nonzero(first)[0] + 1).tolist(), int(order.size)] if order.size else [0]
    keys = zip(device[cuts[:-1]].tolist(), stream[cuts[:-1]].tolist(), strict=True)
    ops = {
        (int(d), int(st)): order[lo:hi]
        for (d, st), lo, hi in zip(keys, cuts[:-1], cuts[1:], strict=True)
    }
    reach = {key: np.maximum.accumulate(launch_ns[rows]) for key, rows in ops.items()}
    return Streams(order, prev, ops, reach)


def api_by_corr(tl: Timeline, corr: np.ndarray) -> np.ndarray:
    """Per correlation id, the API call that carries it (the first listed), -1 none."""
    order = np.argsort(tl.api_corr, kind="stable")
    sorted_corr = tl.api_corr[order]
    if sorted_corr.size == 0:
        return np.full(corr.size, -1, dtype=I64)
    k = np.minimum(np.searchsorted(sorted_corr, corr), sorted_corr.size - 1)
    found: np.ndarray = np.where((sorted_corr[k] == corr) & (corr >= 0), order[k], -1)
    return found


def stream_wait_records(tl: Timeline, corr: np.ndarray) -> np.ndarray:
    """Per correlation id, the GPU-side stream-wait record (``gsync_*`` row) that carries it
    (the last listed), -1 none."""
    is_wait = tl.gsync_kind == SYNC_STREAM_WAIT_EVENT
    return _record_of(tl, np.nonzero(is_wait & (tl.gsync_corr >= 0))[0], corr)


def sync_records(tl: Timeline, corr: np.ndarray) -> np.ndarray:
    """Per correlation id, the GPU-side record of a synchronize other than a stream wait
    (``gsync_*`` row) that carries it (the last listed), -1 none."""
    is_wait = tl.gsync_kind == SYNC_STREAM_WAIT_EVENT
    return _record_of(tl, np.nonzero(~is_wait & (tl.gsync_corr >= 0))[0], corr)


def _record_of(tl: Timeline, rows: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Per correlation id, the last of the records ``rows`` that carries it, -1 none."""
    keys, last = _last_by_key(tl.gsync_corr[rows])
    return _lookup(keys, rows[last] if last.size else last, corr)
