"""A pipeline-parallel greedy decode loop over a small transformer, for profplug.

    .venv/bin/torchrun --nproc-per-node 2 examples/infer.py --steps 64
    .venv/bin/profplug run -o runs/pp2 --sync event -- .venv/bin/torchrun --nproc-per-node 2 \\
        examples/infer.py

The model (embedding, ``--layers`` pre-LN blocks of multi-head attention with a KV cache +
GELU MLP, final LN, LM head) is built from ``--seed`` on every rank, then split: stage s
holds its contiguous slice of blocks. Each step, like Megatron's inference wrapper, a stage
receives activations from the previous stage, runs its blocks and sends to the next; the
last stage samples greedily and returns the token to the first stage. Communication uses
``profplug.p2p`` (policy from ``--sync``, else ``PROFPLUG_SYNC``, else ``device``), and
every step is a ``profplug.step()``; each stage's output goes to ``profplug.digest`` (a no-op
unless ``profplug ab`` checks outputs). The generated tokens depend only on the seed and
sizes, never on the sync policy. CPU: gloo; GPUs: nccl, one per rank (``LOCAL_RANK``).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import profplug
from profplug import p2p


class Block(nn.Module):
    """Pre-LN attention (KV cache) + GELU MLP over one new token per sequence."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def reset(self, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> None:
        shape = (batch, self.heads, max_len, self.head_dim)
        self.k_cache = torch.zeros(shape, device=device, dtype=dtype)
        self.v_cache = torch.zeros(shape, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:  # x: [batch, hidden]
        b = x.shape[0]
        q, k, v = self.qkv(self.ln1(x)).view(b, 3, self.heads, self.head_dim).unbind(1)
        assert self.k_cache is not None and self.v_cache is not None
        self.k_cache[:, :, pos] = k
        self.v_cache[:, :, pos] = v
        keys, values = self.k_cache[:, :, : pos + 1], self.v_cache[:, :, : pos + 1]
        scores = torch.einsum("bhd,bhtd->bht", q, keys) / math.sqrt(self.head_dim)
        att = torch.einsum("bht,bhtd->bhd", scores.softmax(-1), values).reshape(b, -1)
        x = x + self.proj(att)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Stage(nn.Module):
    """The blocks of one pipeline stage; the first embeds, the last samples."""

    def __init__(self, args: argparse.Namespace, stage: int, stages: int) -> None:
        super().__init__()
        torch.manual_seed(args.seed)  # the full model is built identically on every rank
        self.embed = nn.Embedding(args.vocab, args.hidden)
        self.pos = nn.Embedding(args.steps + 1, args.hidden)
        blocks = [Block(args.hidden, args.heads) for _ in range(args.layers)]
        self.ln_f, self.head = nn.LayerNorm(args.hidden), nn.Linear(args.hidden, args.vocab)
        per = [len(range(s, args.layers, stages)) for s in range(stages)]
        start = sum(per[:stage])
        self.blocks = nn.ModuleList(blocks[start : start + per[stage]])
        self.first, self.last = stage == 0, stage == stages - 1

    def forward(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        if self.first:
            x = self.embed(x) + self.pos.weight[pos]
        for block in self.blocks:
            x = block(x, pos)
        if self.last:
            x = self.head(self.ln_f(x)).argmax(-1)  # greedy: [batch] int64
        return x


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="pipeline-parallel decode loop for profplug")
    ap.add_argument("--steps", type=int, default=64, help="tokens to generate")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4, help="blocks in the whole model")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--sync", choices=["device", "event", "none"], default=None,
                    help="p2p sync policy (default: PROFPLUG_SYNC, else device)")
    ap.add_argument("--timed", default="", metavar="A:B",
                    help="steps whose mean time is printed (default: the second half)")
    ap.add_argument("--log-every", type=int, default=0, help="print progress every N steps")
    ap.add_argument("--fail-at", type=int, default=-1, help="(testing) raise at this step")
    ap.add_argument("--fail-rank", type=int, default=-1, help="(testing) rank that raises")
    return ap.parse_args(argv)


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
    if args.sync is not None:
        p2p.set_default_sync(args.sync)

    model = Stage(args, rank, world).to(device).eval()
    for block in model.blocks:
        block.reset(args.batch, args.steps + 1, device, torch.float32)
    g = torch.Generator().manual_seed(args.seed + 1)
    token = torch.randint(0, args.vocab, (args.batch,), generator=g).to(device)
    act = torch.empty(args.batch, args.hidden, device=device)
    tokens, step_s = [token.cpu().clone()], []

    with torch.inference_mode():
        for pos in range(args.steps):
            t0 = time.perf_counter()
            with profplug.step():
                if pos == args.fail_at and rank == args.fail_rank:
                    raise RuntimeError(f"injected failure at step {pos} on rank {rank}")
                x = token if model.first else act
                if not model.first:
                    p2p.recv_from_prev_pipeline_rank_(act)
                y = model(x, pos)
                profplug.digest(y)  # the stage's output (profplug ab checks it across runs)
                if world == 1:
                    token = y
                elif not model.last:
                    p2p.send_to_next_pipeline_rank(y)
                else:
                    p2p.send_to_next_pipeline_rank(y.contiguous())  # the token, to stage 0
                if model.first and world > 1:
                    p2p.recv_from_prev_pipeline_rank_(token)
                if model.first:
                    tokens.append(token.cpu().clone())
            step_s.append(time.perf_counter() - t0)
            if args.log_every and (pos + 1) % args.log_every == 0 and rank == 0:
                print(f"infer: step {pos + 1}", flush=True)

    if rank == 0:
        out = torch.stack(tokens, 1)
        a, _, b = args.timed.partition(":")
        lo = int(a) if a else len(step_s) // 2
        hi = int(b) if b else len(step_s)
        half = step_s[lo:hi]
        print(f"infer: world={world} sync={p2p.default_sync()} device={device.type} "
              f"steps={args.steps} timed={lo}:{hi} "
              f"mean_step_us={1e6 * sum(half) / max(len(half), 1):.1f}")
        for b in range(out.shape[0]):
            print(f"tokens[{b}]: " + " ".join(str(int(t)) for t in out[b]))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
