"""A 2-rank gloo pipeline whose only step function is ``torch.distributed.send``, called on
rank 0 alone (rank 1 calls ``recv``); it never imports profplug (CPU test job for a
``--step-fn`` that only some ranks call).

    torchrun --nproc-per-node 2 send_job.py --tokens 8
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.ones(4)
    for _ in range(args.tokens):
        if rank == 0:
            dist.send(x, 1)
        else:
            dist.recv(x, 0)
            x = x + 1
    sys.stdout.write(f"rank {rank} sum {x.sum().item():.1f}\n")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
