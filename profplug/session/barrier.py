"""The ranks' meeting point before a profiling window (and at an nsys capture's end), with a
timeout and the ranks that never came named.

A collective (``dist.barrier``, an NCCL all-reduce) deadlocks when some rank never gets
there: a ``--step-fn`` that only some ranks call (``torch.distributed:send`` in a pipeline:
rank 0 waits in the barrier, rank 1 in the ``recv`` that rank 0's ``send`` would answer).
This barrier counts arrivals in the process group's store instead, polling with a deadline:
when every rank came, the caller may align further with a collective (all came, so all will
call it); when the deadline passes, the caller opens its window without the others and says
which ranks never came. :class:`Alignment` is a rank's side of it: how many meetings it
reached, and whether the last one had everyone.
"""

from __future__ import annotations

import os
import sys
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


class Alignment:
    """The window's meetings of one rank (``PROFPLUG_ALIGN``): each one a new store key."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.meetings = 0  # reached so far: the key of the next one
        self.aligned = False  # the last meeting had every rank
        self.missing: list[int] = []  # the ranks that never reached the last meeting

    def meet(self, rank: int) -> None:
        """Wait for the other ranks (never a bare collective: a rank that never comes, as a
        step function only some ranks call, would hang the others); on NCCL, an all-reduce
        and a synchronize after it so that the windows open together."""
        dist = sys.modules.get("torch.distributed")
        if not self.enabled or dist is None or not dist.is_available():
            return
        if not dist.is_initialized() or dist.get_world_size() < 2:
            return
        self.meetings += 1
        timeout = timeout_s()
        missing = store_barrier(dist, str(self.meetings), timeout)
        if missing is None:
            return  # no store to count in: the window opens unaligned
        if missing:
            self.missing = missing
            self.aligned = False
            sys.stderr.write(
                f"profplug: warning: rank {rank}: rank(s) {missing} never reached the "
                f"profiling window's barrier within {timeout:g} s ({ENV}): the "
                "window opened without them (a step function that only some ranks "
                "call?)\n")
            sys.stderr.flush()
            return
        if "nccl" in str(dist.get_backend()).lower():
            _all_reduce_and_sync(dist)
        self.aligned = True


def _all_reduce_and_sync(dist: Any) -> None:
    import torch

    from profplug.p2p import original_synchronize

    flag = torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device()))
    dist.all_reduce(flag)
    original_synchronize()()  # the host waits too: windows open together
