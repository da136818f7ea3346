"""Whether the what-if was given every rank of the run: NCCL kernels are coupled across
ranks, so a missing peer's waits stay in the recorded kernel durations and the saving is
wrong (rank 0 alone of a 2-rank decode: 2.5% predicted instead of 38.6%).
"""

from __future__ import annotations

from profplug.analyzers.core.classify import comm_for_symbols
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline

PEERS_MISSING = "peer ranks missing"


def _world_size(tl: Timeline) -> int | None:
    info = tl.metadata.get("distributedInfo") or {}
    ws = info.get("world_size") if isinstance(info, dict) else None
    return ws if isinstance(ws, int) and ws > 0 else None


def world_size(tl: Timeline) -> int | None:
    """The run's world size that ``tl``'s metadata gives (``distributedInfo``), else None."""
    return _world_size(tl)


def lone_comm(tl: Timeline, memo: Memo | None = None) -> bool:
    """Whether ``tl`` runs a NCCL kernel (what a lone rank is warned about)."""
    return bool(tl.n_gpu and (comm := comm_for_symbols(tl.names, memo)).any() and
                comm[tl.gpu_name].any())


def missing_peers(timelines: list[Timeline], memo: Memo | None = None) -> str | None:
    """A warning when ranks of the run are missing (by ``distributedInfo.world_size``, or a
    lone rank running NCCL kernels) and the given ranks run NCCL kernels (without any, no
    wait for a peer is in the trace: nothing the missing ranks would change), else None."""
    return peers_warning([t.rank for t in timelines],
                         [w for t in timelines if (w := _world_size(t)) is not None],
                         any(lone_comm(t, memo) for t in timelines))


def peers_warning(ranks: list[int], sizes: list[int], comm: bool) -> str | None:
    """:func:`missing_peers` from the ranks given, the world sizes their metadata gives and
    whether any of them runs NCCL kernels."""
    if not comm:
        return None
    given = sorted(ranks)
    if sizes:
        absent = sorted(set(range(max(sizes))) - set(given))
        if not absent:
            return None
        what = (f"given rank(s) {', '.join(map(str, given))} of a world of {max(sizes)}; "
                f"no trace of rank(s) {', '.join(map(str, absent))}")
    elif len(given) == 1:
        what = f"rank {given[0]} alone runs NCCL kernels"
    else:
        return None
    return (f"{PEERS_MISSING} ({what}): NCCL kernels keep their recorded durations, which "
            "include waiting for those peers, so the prediction is unreliable; give every "
            "rank's trace")
