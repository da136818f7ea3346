"""torch 2.11 Kineto's stream waits linked to their event record call (the trace gives the
wait's CUDA event id, not the record's correlation): :func:`link_stream_waits`."""

from __future__ import annotations

import numpy as np
from profplug.analyzers.core.timeline import SYNC_STREAM_WAIT_EVENT, Timeline

RECORD_CALLS = ("cudaEventRecord", "cudaEventRecordWithFlags", "hipEventRecord",
                "hipEventRecordWithFlags")
WAIT_CALLS = ("cudaStreamWaitEvent", "hipStreamWaitEvent")


def link_stream_waits(tl: Timeline, event_id: np.ndarray) -> int:
    """Fill ``gsync_wait_corr`` of the stream waits whose record correlation is missing;
    returns how many were linked.

    torch 2.11's Kineto writes every ``Stream Wait Event`` with
    ``wait_on_cuda_event_record_corr_id: -1`` and ``wait_on_stream: -1``, but with
    ``wait_on_cuda_event_id`` (``event_id``, per gsync row). Its ``cudaEventRecord`` /
    ``cudaEventRecordWithFlags`` calls carry only ``cbid`` and ``correlation``: no event id,
    no stream, and there is no GPU-side record of the record. So:

    - the record is the last ``cudaEventRecord*`` call on the waiting call's own host thread
      started before the ``cudaStreamWaitEvent`` call (same correlation as the wait);
    - unless that record call was already taken by an earlier wait on another event id
      (then it is not this event's record: the wait stays unlinked and is counted so);
    - ``gsync_wait_stream`` stays -1: the trace does not say which stream the record was on.

    Checked against Nsight Systems exports of the same workloads, whose CUDA_EVENT table has
    the record's event id and stream (``sample_traces/*nsys``; the counts:
    ``benchmarks/2026-12-03/README.md``): the rule picks the true record, or a record on the
    same stream right after it with no op launched in between (the same awaited work). The
    stream of the op launched last before the record, the other candidate, is often not the
    record's stream, so it is not used.
    """
    if tl.gsync_kind.size == 0 or tl.api_corr.size == 0:
        return 0
    sel = np.nonzero((tl.gsync_kind == SYNC_STREAM_WAIT_EVENT) & (tl.gsync_wait_corr < 0)
                     & (tl.gsync_corr >= 0))[0]
    if sel.size == 0:
        return 0
    ids = {i for i, n in enumerate(tl.names) if n in RECORD_CALLS}
    wids = {i for i, n in enumerate(tl.names) if n in WAIT_CALLS}
    if not ids or not wids:
        return 0
    sel, call = _wait_calls(tl, sel, wids)
    if sel.size == 0:
        return 0
    rec = np.nonzero(np.isin(tl.api_name, list(ids)))[0]
    if rec.size == 0:
        return 0
    rec, j = _records_before(tl, rec, call)
    ev = event_id[sel] if event_id.size == tl.gsync_kind.size else np.full(sel.size, -1)
    ok = _first_event_owns(j, tl.api_start_ns[call], ev)
    tl.gsync_wait_corr[sel[ok]] = tl.api_corr[rec[j[ok]]]
    return int(ok.sum())


def _wait_calls(tl: Timeline, sel: np.ndarray, wids: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """The stream waits ``sel`` (gsync rows) whose own wait call (a ``WAIT_CALLS`` call of
    the same correlation; ``wids``: their name ids) is in the trace, and those calls' rows."""
    w_rows = np.nonzero(np.isin(tl.api_name, list(wids)))[0]
    order = np.argsort(tl.api_corr[w_rows], kind="stable")
    w_corr = tl.api_corr[w_rows][order]
    w_rows = w_rows[order]
    if w_corr.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    k = np.minimum(np.searchsorted(w_corr, tl.gsync_corr[sel]), w_corr.size - 1)
    has = w_corr[k] == tl.gsync_corr[sel]  # the wait's own call
    return sel[has], w_rows[k[has]]


def _records_before(tl: Timeline, rec: np.ndarray, call: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The record calls ``rec`` sorted by (thread, start), and per wait call (``call``) the
    last of them that started before it on its thread (index into the sorted ones, -1)."""
    rec = rec[np.lexsort((rec, tl.api_start_ns[rec], tl.api_tid[rec]))]
    r_tid, r_t = tl.api_tid[rec], tl.api_start_ns[rec]
    q_tid, q_t = tl.api_tid[call], tl.api_start_ns[call]
    j = np.full(call.size, -1, dtype=np.int64)
    for t in np.unique(q_tid).tolist():
        a, b = np.searchsorted(r_tid, t, "left"), np.searchsorted(r_tid, t, "right")
        qi = np.nonzero(q_tid == t)[0]
        jj = np.searchsorted(r_t[a:b], q_t[qi], side="left") - 1
        j[qi] = np.where(jj >= 0, a + jj, -1)
    return rec, j


def _first_event_owns(j: np.ndarray, q_t: np.ndarray, ev: np.ndarray) -> np.ndarray:
    """Per wait, whether it links to its record call ``j`` (-1: none): one event id per
    record call, that of the first wait (in host order, ``q_t`` ns) that takes it; a later
    wait on another id (``ev``, -1: unknown) does not link to it."""
    owner: dict[int, int] = {}
    ok = j >= 0
    for i in np.lexsort((q_t, j)).tolist():
        r = int(j[i])
        if r < 0:
            continue
        e = int(ev[i])
        first = owner.setdefault(r, e)
        if e >= 0 and first >= 0 and e != first:
            ok[i] = False
    return ok
