"""Helpers: run a function on N gloo ranks in real processes (torch.multiprocessing)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank: int, world: int, init_file: str, fn: Callable[..., Any], args: tuple) -> None:
    os.environ["RANK"] = str(rank)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_ranks(world: int, fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(rank, world, *args)`` on ``world`` gloo ranks; a failing rank fails the call."""
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        mp.start_processes(
            _entry, args=(world, init_file, fn, args), nprocs=world, join=True,
            start_method="spawn",
        )
