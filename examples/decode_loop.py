"""A minimal pipeline decode loop: stages of bf16 ``GELU(x @ W)`` layers, any size, 1+ GPUs.

    python examples/decode_loop.py --hidden 4096 --layers 8 --batch 8 --stages 2
    .venv/bin/torchrun --nproc-per-node 2 examples/decode_loop.py --hidden 4096
    profplug run -o runs/dl --sync event -- python examples/decode_loop.py --stages 2

The model is ``--stages`` stages of ``--layers`` layers each (one [batch, H] x [H, H] bf16
matmul + GELU per layer, a layer norm at the end of each stage), built from ``--seed``. Each
step the activation goes through every stage and the last stage's output is fed back to the
first (a decode step). Each step's output goes to ``profplug.digest`` (a no-op unless
``profplug ab`` checks that every policy and round computed the same outputs).

- One process (``WORLD_SIZE`` 1), all stages on one GPU. Before each stage (the first too:
  it receives the last stage's output) the activation is handed over the way NCCL hands it
  over: copied into the stage's buffer on a separate communication stream that first waits
  for the compute stream; the compute stream then waits for the copy
  (``cudaStreamWaitEvent``, what ``req.wait()`` does). Policy ``device`` adds
  ``torch.cuda.synchronize()`` after that wait, as Megatron-Core's
  ``recv_from_prev_pipeline_rank_`` does; ``event`` and ``none`` rely on the stream wait.
- Several processes: one stage per rank (``--stages`` is the world size), activations sent
  with ``profplug.p2p`` (NCCL on GPUs, gloo on CPUs) under the same policy.

The policy comes from ``--sync``, else ``profplug.current_policy()``, asked at every step
(``PROFPLUG_SYNC``, what ``profplug run --sync`` and ``profplug ab`` set, else ``device``;
``profplug ab --switch-every N`` flips it inside the run). Every step is a
``profplug.step()``. The output does not depend on the policy: the last line prints a
checksum of the final activation.
Unprofiled step time: ``--timed A:B`` steps are timed on the host between two synchronizes
(one before step A, one after step B-1), so the timing adds no per-step synchronization.

``--switch STEP:POLICY``: the policy changes at step STEP (the job's own switch, for traced
runs; ``profplug ab`` switches through ``current_policy()`` instead), and every step is also
a range ``decode.<policy>`` (``profplug.annotate``): one traced process holds both policies, so a
what-if of its ``decode.device`` steps can be checked against its ``decode.event`` steps at
the same host speed (the 1-GPU VM's host speed differs from process to process:
``benchmarks/host_modes.py``; ``benchmarks/whatif_grid.py`` traces ``kineto-switch``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import profplug
from profplug import p2p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="pipeline decode loop of GELU(x @ W) stages")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=8, help="layers per stage")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--stages", type=int, default=2, help="stages (one process: all local)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--sync", choices=["device", "event", "none"], default=None)
    ap.add_argument("--timed", default="", metavar="A:B",
                    help="steps timed without profiling (default: the second half)")
    ap.add_argument("--switch", default="", metavar="STEP:POLICY",
                    help="from step STEP on, run policy POLICY; every step is then also a "
                         "range decode.<policy> (a same-process A/B in one trace)")
    args = ap.parse_args(argv)
    if args.switch:
        a, _, b = args.switch.partition(":")
        if not a.isdigit() or b not in ("device", "event", "none"):
            ap.error("--switch: STEP:POLICY, e.g. 50:event")
    return args


def weights(args: argparse.Namespace, stage: int, device: torch.device) -> list[torch.Tensor]:
    """The stage's weights, drawn on ``device`` (fast for big ``--hidden``)."""
    g = torch.Generator(device=device).manual_seed(args.seed + 1000 * stage)
    scale = (2.0 / args.hidden) ** 0.5  # He init: GELU keeps the scale
    return [(torch.randn(args.hidden, args.hidden, generator=g, device=device) * scale)
            .to(torch.bfloat16) for _ in range(args.layers)]


def run_stage(x: torch.Tensor, ws: list[torch.Tensor]) -> torch.Tensor:
    for w in ws:
        x = F.gelu(x @ w)
    return F.layer_norm(x, x.shape[-1:])  # keeps values alive over many steps


class LocalHandOff:
    """Stage-to-stage hand-off on one GPU, shaped like a NCCL recv (see module docstring)."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        self.comm = torch.cuda.Stream(device=device)
        self.bufs = [torch.empty(args.batch, args.hidden, device=device, dtype=torch.bfloat16)
                     for _ in range(args.stages)]

    def __call__(self, x: torch.Tensor, stage: int, policy: str) -> torch.Tensor:
        main = torch.cuda.current_stream()
        buf = self.bufs[stage]
        self.comm.wait_stream(main)
        with torch.cuda.stream(self.comm):
            buf.copy_(x)
        main.wait_stream(self.comm)  # req.wait(): the compute stream waits on the transfer
        if policy == "device":
            torch.cuda.synchronize()  # Megatron's race-condition guard
        return buf


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo")
        args.stages = world
    elif not cuda:
        raise SystemExit("decode_loop.py: one process needs a CUDA GPU (or run it with "
                         "torchrun on CPUs)")
    policy = args.sync or profplug.current_policy()
    follow = not args.sync and not args.switch  # ask current_policy() every step
    switch_at, _, then = args.switch.partition(":")
    switch = int(switch_at) if args.switch else -1
    stages = [rank] if world > 1 else list(range(args.stages))
    ws = {s: weights(args, s, device) for s in stages}
    g = torch.Generator().manual_seed(args.seed)
    x = (torch.randn(args.batch, args.hidden, generator=g)).to(device, torch.bfloat16)
    act = torch.empty_like(x)
    hand_off = LocalHandOff(args, device) if world == 1 else None
    a, _, b = args.timed.partition(":")
    lo, hi = (int(a) if a else args.steps // 2), (int(b) if b else args.steps)
    t0 = t1 = 0.0

    with torch.inference_mode():
        for step in range(args.steps):
            if step == lo:
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
            if step == switch:
                policy = then
            elif follow:
                policy = profplug.current_policy()
            with profplug.step(), (profplug.annotate(f"decode.{policy}") if switch >= 0
                                   else contextlib.nullcontext()):
                if hand_off is not None:
                    for s in stages:
                        x = run_stage(hand_off(x, s, policy), ws[s])
                    profplug.digest(x)  # the step's output (profplug ab checks it)
                else:
                    if rank > 0:
                        p2p.recv_from_prev_pipeline_rank_(act, sync=policy)
                    y = run_stage(x if rank == 0 else act, ws[rank])
                    profplug.digest(y)
                    p2p.send_to_next_pipeline_rank(y, sync=policy)
                    if rank == 0:
                        p2p.recv_from_prev_pipeline_rank_(act, sync=policy)
                        x = act.clone()
            if step == hi - 1:
                if cuda:
                    torch.cuda.synchronize()
                t1 = time.perf_counter()

    if rank == 0:
        n = max(hi - lo, 1)
        print(f"decode_loop: world={world} stages={args.stages} hidden={args.hidden} "
              f"layers={args.layers} batch={args.batch} sync={policy} steps={args.steps} "
              f"timed={lo}:{hi} mean_step_us={1e6 * (t1 - t0) / n:.1f}")
        digest = hashlib.sha1(x.float().cpu().numpy().tobytes()).hexdigest()[:16]
        print(f"checksum: {float(x.float().abs().sum()):.6f} sha1:{digest}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
