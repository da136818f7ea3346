"""Several greedy-decode loops of a Megatron-Core GPT, each a fresh request, as a server does.

    .venv/bin/torchrun --nproc-per-node 2 examples/megatron_generate_loops.py --loops 3
    .venv/bin/profplug run -o runs/loops -- .venv/bin/torchrun --nproc-per-node 2 \\
        examples/megatron_generate_loops.py

A second Megatron-Core client, of another shape than ``megatron_gpt_infer.py`` (16 layers,
batch 16 by default): ``--loops`` generate calls of ``--steps`` tokens, each with a new prompt
and a fresh inference context; between two loops the job's own ``torch.cuda.synchronize()``,
``--pause-ms`` of host work on every rank (preparing the next request: tokenizing, batching)
and a barrier. So the window holds loop boundaries, where one rank's host is away while the
other waits: the steps a what-if must not take for the job's step. It never imports profplug:
under ``profplug run`` Megatron's ``run_one_forward_step`` calls are the steps.

GPUs only (NCCL, one per rank, pipeline size = world size).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from megatron.core.inference import communication_utils as comm
from megatron_gpt_infer import build


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Megatron-Core GPT, several generate loops")
    ap.add_argument("--loops", type=int, default=3, help="generate calls")
    ap.add_argument("--steps", type=int, default=32, help="tokens per generate call")
    ap.add_argument("--prompt", type=int, default=16, help="prompt length (tokens)")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--layers", type=int, default=16, help="layers in the whole model")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--pause-ms", type=float, default=50.0,
                    help="host work between two generate calls, every rank")
    return ap.parse_args(argv)


def _host_work(ms: float) -> None:
    """Busy host work (not a sleep: a request being prepared keeps the CPU busy)."""
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("megatron_generate_loops.py needs CUDA GPUs (NCCL, one per rank)")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    gen_args = argparse.Namespace(**{**vars(args), "steps": args.steps})
    ps, wrapper, context, max_len = build(gen_args, world)
    g = torch.Generator().manual_seed(args.seed + 1)
    step_s: list[float] = []
    digest = 0
    with torch.inference_mode():
        for loop in range(args.loops):
            if loop:  # between requests: the job's own sync, host work, a barrier
                torch.cuda.synchronize()
                _host_work(args.pause_ms)
                dist.barrier()
            context.reset()
            tokens = torch.zeros(args.batch, max_len, dtype=torch.long)
            tokens[:, : args.prompt] = torch.randint(0, args.vocab, (args.batch, args.prompt),
                                                     generator=g)
            tokens = tokens.cuda()
            inference_input = wrapper.prep_inference_input(tokens)
            start, end = 0, args.prompt
            for _ in range(args.steps):
                t0 = time.perf_counter()
                window = wrapper.get_batch_for_context_window(inference_input, start, end)
                logits = wrapper.run_one_forward_step(window)
                if logits is not None:
                    logits = logits[:, -1:, :].contiguous()
                logits = comm.broadcast_from_last_pipeline_stage(
                    [args.batch, 1, args.vocab], torch.float32, logits, wrapper.pp_group)
                tokens[:, end] = logits[:, -1, :].argmax(-1)
                context.enable_decode_mode()
                start, end = end, end + 1
                step_s.append(time.perf_counter() - t0)
            digest = hash((digest, tuple(tokens[:, args.prompt:end].flatten().tolist())))
    if rank == 0:
        step_s.sort()
        print(f"megatron_generate_loops: world={world} loops={args.loops} steps={args.steps} "
              f"median_step_us={1e6 * step_s[len(step_s) // 2]:.1f} tokens_digest={digest}")
    ps.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
