"""A 2-rank gloo decode loop whose steps are ``stepmod.Decoder.decode`` calls; it never
imports profplug (CPU test job for ``profplug run --step-fn``). Without torchrun (no
``WORLD_SIZE``) it is one process, rank 0, without a process group.

    torchrun --nproc-per-node 2 stepfn_job.py --tokens 12 [--exit N [--exit-rank R]]
        [--capture-end-at K]
    python stepfn_job.py --tokens 12

``--exit N --exit-rank R``: rank R exits with status N after the loop while the others
sleep (torchrun then stops them with SIGTERM).

``--capture-end-at K``: after K tokens rank 0 creates the file ``FAKE_NSYS_CAPTURE_END``
(where a GPU job's window would call cudaProfilerStop; see ``tests/runtime/fake_nsys.py``)
and pauses for a second, the time nsys's ``--kill`` signal would need to arrive.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from ranklines import say
from stepmod import Decoder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=12)
    ap.add_argument("--exit", type=int, default=0, help="exit status of every rank")
    ap.add_argument("--exit-rank", type=int, default=-1, help="only this rank exits --exit")
    ap.add_argument("--capture-end-at", type=int, default=-1)
    args = ap.parse_args()
    group = "WORLD_SIZE" in os.environ
    if group:
        dist.init_process_group("gloo")
    dec = Decoder(16)
    x = torch.ones(2, 16)
    for i in range(args.tokens):
        x = dec.decode(x)
        if i + 1 == args.capture_end_at and (not group or dist.get_rank() == 0):
            open(os.environ["FAKE_NSYS_CAPTURE_END"], "w").close()
            time.sleep(1.0)
    rank = dist.get_rank() if group else 0
    say(f"rank {rank} sum {x.sum().item():.6f}")
    if group:
        dist.destroy_process_group()
    if args.exit_rank not in (-1, rank):
        time.sleep(60)
    sys.exit(args.exit)


if __name__ == "__main__":
    main()
