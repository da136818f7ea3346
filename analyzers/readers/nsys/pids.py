"""Processes in an Nsight export: the key of a ``globalPid`` / ``globalTid``.

Bits 0-23 of a globalTid are the thread, bits 24-47 the pid, and the bits above them the
host / VM the process ran on. Two processes with one pid on two hosts or VMs are two
processes, so the key keeps those bits (a pid alone merged them into one rank, with a
window spanning both). A row whose globalPid is NULL belongs to no process.
"""

from __future__ import annotations

import numpy as np

PROCESS_MASK = 0xFF_FFFF_FFFF  # 40 bits above the thread id: host/VM bits and pid
NO_PROCESS = "no process (NULL globalPid)"


def process_of(g: np.ndarray) -> np.ndarray:
    """The process key of globalPid / globalTid values (``key & 0xFFFFFF`` is the pid)."""
    return (g >> 24) & PROCESS_MASK


def drop_null_pid(gpu: dict[str, np.ndarray], sync: dict[str, np.ndarray]
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """GPU and sync rows whose globalPid is NULL (read as 0) removed and counted, when other
    rows have a process (an export without the column has 0 everywhere: kept)."""
    n = 0
    out = []
    for d in (gpu, sync):
        null = d["pid"] == 0
        if null.any() and not null.all():
            n += int(null.sum())
            d = {k: v[~null] for k, v in d.items()}
        out.append(d)
    return out[0], out[1], n
