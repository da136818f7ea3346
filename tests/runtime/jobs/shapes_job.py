"""A 2-rank gloo decode loop whose step function is the script's own ``decode_step``, called
from ``main()`` under ``if __name__ == "__main__":``; it imports its engine (a nested
module that imports torch first) before torch. Never imports profplug (CPU test job).

    torchrun --nproc-per-node 2 shapes_job.py --tokens 14
"""

# ruff: noqa: I001  (the engine is imported before torch on purpose)
from __future__ import annotations

import argparse
import sys

from shapepkg.inner.engine import Engine  # before torch: the session starts inside it

import torch
import torch.distributed as dist


def decode_step(engine: Engine, x: torch.Tensor) -> torch.Tensor:
    """The step: named ``__main__:decode_step``."""
    return engine.step(x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=14)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    engine = Engine(16)
    x = torch.ones(2, 16)
    for _ in range(args.tokens):
        x = decode_step(engine, x)
    sys.stdout.write(f"rank {dist.get_rank()} sum {x.sum().item():.6f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
