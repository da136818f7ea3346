"""NCCL kernels paired across ranks: the k-th kernel of one name on rank a with the k-th on
rank b (2 ranks). Kernel names such as ``ncclDevKernel_SendRecv`` do not say which side
sends, so the pairing is by order, and the assumption is reported.
"""

from __future__ import annotations

import re

import numpy as np

from .. import classify
from ..timeline import Timeline


def _base(name: str) -> str:
    return name.split("(", 1)[0].strip()


_P2P = re.compile(r"send|recv", re.IGNORECASE)


def match_nccl(timelines: list[Timeline], o_base: list[int], n_ops: int,
               notes: list[str], warns: list[str]) -> np.ndarray:
    """Pair the k-th NCCL kernel of one name on rank a with the k-th on rank b (2 ranks).

    GPU op ``o`` of ``timelines[k]`` is op ``o_base[k] + o`` of the run (``n_ops`` in all).
    """
    peer = np.full(n_ops, -1, dtype=np.int64)
    comm: list[dict[str, np.ndarray]] = []
    for tl in timelines:
        is_comm = classify.comm_for_symbols(tl.names)[tl.gpu_name] if tl.n_gpu else \
            np.zeros(0, dtype=bool)
        groups: dict[str, list[int]] = {}
        for o in np.nonzero(is_comm)[0]:
            groups.setdefault(_base(tl.names[tl.gpu_name[o]]), []).append(int(o))
        comm.append({k: np.array(v)[np.argsort(tl.gpu_start_ns[v], kind="stable")]
                     for k, v in groups.items()})
    if not any(comm):
        return peer
    if len(timelines) != 2:
        notes.append("NCCL kernels are not coupled across ranks (pairing is only done for 2 "
                     "ranks): they keep their recorded durations")
        return peer
    (g0, g1), (b0, b1) = comm, (o_base[0], o_base[1])
    for name in sorted(set(g0) | set(g1)):
        a, c = g0.get(name), g1.get(name)
        if a is None or c is None or a.size != c.size:
            warns.append(f"NCCL kernel {name}: {0 if a is None else a.size} on rank "
                         f"{timelines[0].rank} vs {0 if c is None else c.size} on rank "
                         f"{timelines[1].rank}: not paired, recorded durations kept")
            continue
        peer[b0 + a] = b1 + c
        peer[b1 + c] = b0 + a
        if _P2P.search(name):
            notes.append(f"NCCL {name}: the k-th kernel of one rank is paired with the k-th "
                         "of the other (send/recv direction is not in the kernel name)")
    return peer
