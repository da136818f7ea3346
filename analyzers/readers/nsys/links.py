"""Stream waits (SYNCHRONIZATION syncType 2) linked to the event record they wait on."""

from __future__ import annotations

import numpy as np
from profplug.analyzers.readers.nsys.pids import PROCESS_MASK

I64 = np.int64
FAST_LINKS = True  # keys built by shifts when the ids fit (False: the general path)


def _pid(g: np.ndarray) -> np.ndarray:
    return (g >> 24) & PROCESS_MASK


def link_waits(d: dict[str, np.ndarray], events: list[np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per sync row of ``d`` (pid, event, corr columns), the awaited record's (stream, corr).

    ``events`` = CUDA_EVENT columns (globalPid, eventId, streamId, correlationId). A wait's
    record is the one of its process and eventId with the largest correlationId below the
    wait's (ties: the last row); -1, -1 when there is none.
    """
    n = d["pid"].size
    ws, wc = np.full(n, -1, dtype=I64), np.full(n, -1, dtype=I64)
    gp, eid, est, ecorr = events
    q = np.nonzero((d["event"] >= 0) & (d["corr"] >= 0))[0]
    if q.size == 0 or gp.size == 0:
        return ws, wc
    # Records sorted by (pid, eventId, corr); each wait looks for the last record of its
    # (pid, eventId) with a smaller corr. Group and corr make one int64 key, so one
    # searchsorted does every wait.
    epid, qpid, qev, qcorr = _pid(gp), d["pid"][q], d["event"][q], d["corr"][q]
    lo = min(int(ecorr.min()), int(qcorr.min()))
    hi = max(int(ecorr.max()), int(qcorr.max()))
    if (FAST_LINKS and gp.size < 1 << 23 and hi - lo < 1 << 40 and int(eid.min()) >= 0
            and max(int(eid.max()), int(qev.max())) < 1 << 39):
        groups, gid = np.unique((epid << 39) | eid, return_inverse=True)
        qk = (qpid << 39) | qev
        qg = np.minimum(np.searchsorted(groups, qk), groups.size - 1)
        hit = groups[qg] == qk
        shift = 40
        rkeys, qkeys = (gid.reshape(-1) << shift) | (ecorr - lo), (qg << shift) | (qcorr - lo)
    else:  # (pid, eventId) -> group id and corr -> rank, over records and waits together
        m = gp.size
        pairs = np.concatenate([np.stack([epid, eid], axis=1), np.stack([qpid, qev], axis=1)])
        g = np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1).astype(I64)
        rank = np.unique(np.concatenate([ecorr, qcorr]),
                         return_inverse=True)[1].reshape(-1).astype(I64)
        shift, hit = 32, np.ones(q.size, dtype=bool)
        rkeys, qkeys = (g[:m] << shift) | rank[:m], (g[m:] << shift) | rank[m:]
    order = np.argsort(rkeys, kind="stable")
    rkeys, est, ecorr = rkeys[order], est[order], ecorr[order]
    j = np.searchsorted(rkeys, qkeys, side="left") - 1
    ok = hit & (j >= 0)
    ok[ok] = (rkeys[j[ok]] >> shift) == (qkeys[ok] >> shift)
    ws[q[ok]], wc[q[ok]] = est[j[ok]], ecorr[j[ok]]
    return ws, wc
