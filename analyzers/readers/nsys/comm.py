"""Communication ops of an Nsight export: the ``comm_*`` rows of each process's timeline.

profplug's ranges and NCCL's own NVTX ranges (``ncclSend``, ``ncclRecv``, ``ncclBroadcast``...,
domain ``NCCL``) are annotations already; ``commops.add_annotation_ops`` turns them into
rows. NCCL describes its calls with an NVTX extended payload whose schema has a ``Peer rank``
entry (the rank in the NCCL communicator). Exports that carry the payload as JSON text
(``NVTX_EVENTS.jsonText``) give the peer here; the exports of ``sample_traces`` (nsys
2025.3) list the schema but leave ``jsonText`` and ``binaryData`` empty, so there the peer
comes from profplug's ranges or the stated fallbacks (``graph.matching``).
"""

from __future__ import annotations

import re

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers import commops
from profplug.analyzers.readers.nsys.pids import PROCESS_MASK
from profplug.analyzers.readers.nsys.source import Export

NVTX = "NVTX_EVENTS"
_PEER = re.compile(r'"Peer rank"\s*:\s*"?(-?[0-9]{1,9})(?![0-9])')  # a rank: fits int32
PeerKey = tuple[int, int, int]  # (pid, tid, start ns)


def nccl_peers(ex: Export) -> dict[PeerKey, int]:
    """``Peer rank`` of every NVTX range whose JSON payload has one, by (pid, tid, start)."""
    if not (ex.has(NVTX, "jsonText") and ex.has(NVTX, "globalTid")):
        return {}
    out: dict[PeerKey, int] = {}
    q = (f"SELECT start, globalTid, jsonText FROM {NVTX} "
         "WHERE jsonText IS NOT NULL AND jsonText LIKE '%Peer rank%'")
    for start, gtid, text in ex.conn.execute(q):
        m = _PEER.search(str(text))
        if m and start is not None and gtid is not None:
            out[((int(gtid) >> 24) & PROCESS_MASK, int(gtid) & 0xFFFFFF, int(start))] = int(m[1])
    return out


def fill_comm(tl: Timeline, pid: int, peers: dict[PeerKey, int]) -> None:
    """Add the process's communication ops (its annotations, NCCL payload peers) to ``tl``."""
    rows: dict[int, int] = {}
    if peers:
        for k, (t, s) in enumerate(zip(tl.ann_tid.tolist(), tl.ann_start_ns.tolist(),
                                       strict=True)):
            peer = peers.get((pid, t, s))
            if peer is not None:
                rows[k] = peer
    commops.add_annotation_ops(tl, rows)
