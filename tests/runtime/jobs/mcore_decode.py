"""A 2-stage Megatron-Core "decode" on gloo that never imports profplug (CPU test job).

The real ``GPTInferenceWrapper.run_one_forward_step`` runs once per token (with the real
pipeline forward path: recv from the previous stage, forward, send to the next), the model
is stubbed (one linear layer per stage), and the next token comes from Megatron's own
``broadcast_from_last_pipeline_stage``, as in the static controller.

    torchrun --nproc-per-node 2 mcore_decode.py --tokens 8
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.distributed as dist
from megatron.core import parallel_state as ps
from megatron.core.inference import communication_utils as comm
from megatron.core.inference.model_inference_wrappers.gpt.gpt_inference_wrapper import (
    GPTInferenceWrapper,
)
from ranklines import say

HIDDEN, VOCAB, BATCH = 8, 11, 2


class Stage(torch.nn.Module):
    def __init__(self, first: bool) -> None:
        super().__init__()
        self.first = first
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layer = torch.nn.Linear(HIDDEN, HIDDEN if first else VOCAB)
        self.input_tensor: torch.Tensor | None = None

    def set_input_tensor(self, tensor: torch.Tensor | None) -> None:
        self.input_tensor = tensor

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.first:  # [batch, seq] -> [seq, batch, hidden], Megatron's layout
            return self.layer(self.embed(tokens)).transpose(0, 1).contiguous()
        assert self.input_tensor is not None
        return self.layer(self.input_tensor).transpose(0, 1)  # [batch, seq, vocab]


class Context:
    def __init__(self) -> None:
        self.sequence_len_offset = 0

    def increment_sequence_len_offset(self, n: int) -> None:
        self.sequence_len_offset += n


class Config:
    inference_batch_times_seqlen_threshold = -1
    params_dtype = torch.float32
    hidden_size = HIDDEN


class Wrapper(GPTInferenceWrapper):
    """The real class; only what needs a GPTModel and CUDA is replaced."""

    def __init__(self, model: Stage) -> None:
        self.model = model
        self.inference_wrapper_config = Config()
        self.inference_context = Context()
        self.pipeline_communication_dtype = torch.float32
        self.pp_group = ps.get_pipeline_model_parallel_group()

    def _allocate_recv_buffer(self, batch_size: int, seq_len: int) -> torch.Tensor:
        return torch.empty(seq_len, batch_size, HIDDEN)

    def _forward(self, inference_input):
        return self.model(inference_input["tokens"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--show-patches", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    ps.initialize_model_parallel(pipeline_model_parallel_size=dist.get_world_size())
    torch.manual_seed(0)
    stages = [Stage(first=True), Stage(first=False)]
    wrapper = Wrapper(stages[0] if ps.is_pipeline_first_stage() else stages[1])
    tokens = torch.tensor([[1], [2]])
    out = []
    for _ in range(args.tokens):
        last = tokens[:, -1:]
        logits = wrapper.run_one_forward_step(
            {"tokens": last, "position_ids": torch.zeros_like(last), "attention_mask": None})
        nxt = logits[:, -1].argmax(-1) if ps.is_pipeline_last_stage() else None
        nxt = comm.broadcast_from_last_pipeline_stage([BATCH], torch.int64, nxt)
        tokens = torch.cat([tokens, nxt.view(BATCH, 1)], dim=1)
        out.append(tokens[:, -1].tolist())
    if args.show_patches:
        p2p = sys.modules.get("profplug.p2p")
        say(f"patches rank={dist.get_rank()} "
            f"megatron={getattr(comm.send_to_next_pipeline_rank, '__profplug__', False)} "
            f"synchronize={getattr(torch.cuda.synchronize, '__profplug__', False)} "
            f"sync={p2p.default_sync() if p2p else None}")
    say(f"rank {dist.get_rank()} tokens {out}")
    ps.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
