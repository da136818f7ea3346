"""Helpers: run a function on N gloo ranks in real processes (torch.multiprocessing).

The ranks are forked from a forkserver that imported torch once (per test process), not
spawned: a spawned rank imports torch again (~2 CPU-s each), which made these tests the
suite's slowest on a 2-core machine. The server itself never runs a torch op, so forking it
is safe (no OpenMP pool, no CUDA context), and each rank still starts as its own process with
its own gloo group. A caller whose ranks import more (Megatron-Core) names those modules
(``preload``): the server imports them too, when this call starts it (a worker's first), so
each rank does not."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

_PRELOAD = ["torch", "torch.distributed", "runtime._dist"]


def _entry(rank: int, world: int, init_file: str, fn: Callable[..., Any], args: tuple) -> None:
    os.environ["RANK"] = str(rank)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_ranks(world: int, fn: Callable[..., Any], *args: Any, preload: Sequence[str] = ()
              ) -> None:
    """Run ``fn(rank, world, *args)`` on ``world`` gloo ranks; a failing rank fails the call.
    ``preload``: modules the ranks import, for the server to import first (see above)."""
    multiprocessing.get_context("forkserver").set_forkserver_preload([*_PRELOAD, *preload])
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        mp.start_processes(
            _entry, args=(world, init_file, fn, args), nprocs=world, join=True,
            start_method="forkserver",
        )
