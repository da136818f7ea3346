"""A small decode loop for ``profplug ab`` tests (CPU; 2 gloo ranks under torchrun, or one
process). Every step is a ``profplug.step()`` and every rank digests its step's output.

    python ab_job.py --steps 12 [--plant-policy event --plant-step 5 --plant-rank 1]
        [--fail-round 1 --fail-policy event] [--show-patches] [--pause-ms 10]

``--plant-*``: under that sync policy (``profplug.current_policy()``, asked every step:
what ``profplug ab`` sets) that rank's output of that step is changed: a planted
policy-dependent result.
``--fail-*``: in that round and policy (``PROFPLUG_AB_ROUND``/``PROFPLUG_AB_POLICY``) rank
``--plant-rank`` raises at step 3.
``--pause-ms``: each step sleeps that long after its work (a long job that waits for a signal
without keeping a core busy).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from ranklines import say

import profplug


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--plant-policy", default="")
    ap.add_argument("--plant-step", type=int, default=-1)
    ap.add_argument("--plant-rank", type=int, default=0)
    ap.add_argument("--fail-round", type=int, default=-1)
    ap.add_argument("--fail-policy", default="")
    ap.add_argument("--show-patches", action="store_true")
    ap.add_argument("--pause-ms", type=float, default=0.0)
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    fail = (os.environ.get("PROFPLUG_AB_ROUND") == str(args.fail_round)
            and os.environ.get("PROFPLUG_AB_POLICY") == args.fail_policy)
    torch.manual_seed(0)
    w = torch.randn(32, 32) / 32**0.5
    x = torch.ones(4, 32)
    for i in range(args.steps):
        with profplug.step():
            if fail and rank == args.plant_rank and i == 3:
                raise RuntimeError(f"planted failure in round {args.fail_round}")
            if world > 1 and rank == 1:
                dist.recv(x, 0)
            y = torch.tanh(x @ w)
            policy = profplug.current_policy()
            if policy == args.plant_policy and i == args.plant_step and rank == args.plant_rank:
                y[0, 0] += 1.0
            profplug.digest(y)
            if world > 1 and rank == 0:
                dist.send(y, 1)
            if world > 1:
                dist.broadcast(y, 1)
            x = y
        if args.pause_ms:
            time.sleep(args.pause_ms / 1000)
    say(f"rank {rank} sum {float(x.sum()):.6f}")
    if args.show_patches:  # what profplug's startup hook patched (profplug run's --patch)
        import profplug.p2p as p2p

        say(f"patches rank={rank} synchronize="
            f"{getattr(torch.cuda.synchronize, '__profplug__', False)} "
            f"sync={p2p.default_sync()}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
