"""The ranks' meeting point before a profiling window (and at an nsys capture's end), with a
timeout and the ranks that never came named.

A collective (``dist.barrier``, an NCCL all-reduce) deadlocks when some rank never gets
there: a ``--step-fn`` that only some ranks call (``torch.distributed:send`` in a pipeline:
rank 0 waits in the barrier, rank 1 in the ``recv`` that rank 0's ``send`` would answer).
This barrier counts arrivals in the process group's store instead, polling with a deadline:
when every rank came, the caller may align further with a collective (all came, so all will
call it); when the deadline passes, the caller opens its window without the others and says
which ranks never came.
"""

from __future__ import annotations

import os
import time
from typing import Any

TIMEOUT_S = 60.0  # default wait for the other ranks (PROFPLUG_ALIGN_TIMEOUT_S)
ENV = "PROFPLUG_ALIGN_TIMEOUT_S"
PREFIX = "profplug/align"


def timeout_s() -> float:
    """``$PROFPLUG_ALIGN_TIMEOUT_S`` when a positive number of seconds, else 60."""
    try:
        t = float(os.environ.get(ENV, ""))
    except ValueError:
        return TIMEOUT_S
    return t if 0 < t < 86_400 else TIMEOUT_S


def store_barrier(dist: Any, key: str, timeout: float) -> list[int] | None:
    """Wait up to ``timeout`` seconds for every rank of the default group to reach ``key``.

    Returns [] when all came, the ranks that did not when the time is up, None when the
    group has no store to count in (the caller then does not align)."""
    try:
        store = dist.distributed_c10d._get_default_store()
        world, rank = int(dist.get_world_size()), int(dist.get_rank())
        store.set(f"{PREFIX}/{key}/rank{rank}", "1")
        count = f"{PREFIX}/{key}/count"
        n = int(store.add(count, 1))
        deadline = time.monotonic() + timeout
        pause = 0.001
        while n < world:
            if time.monotonic() >= deadline:
                return [r for r in range(world)
                        if not store.check([f"{PREFIX}/{key}/rank{r}"])]
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
            n = int(store.add(count, 0))
    except Exception:  # no store (a custom backend), or it went with its host: unaligned
        return None
    return []
