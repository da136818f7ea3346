"""Hugging Face transformers' own pipeline-parallel inference: a small Llama, PP=2, generate().

Run it with torchrun (it never imports profplug):

    .venv/bin/torchrun --nproc-per-node 2 examples/hf_pipeline_generate.py
    .venv/bin/profplug run -o runs/hf -- .venv/bin/torchrun --nproc-per-node 2 examples/hf_pipeline_generate.py
    .venv/bin/profplug ab -o runs/hf-ab --policies device,event -- .venv/bin/torchrun --nproc-per-node 2 \
        examples/hf_pipeline_generate.py

The model is built from a config (random weights, seeded: every rank builds the same one),
saved to a temporary folder and loaded again with ``from_pretrained(...,
distributed_config=DistributedConfig(pp_size=2))``: that is how transformers turns its
pipeline on (``from_config`` does not). Nothing is downloaded and there is no tokenizer: the
prompts are token ids. transformers splits ``model.layers`` between the stages; stage 0 sends
its hidden states to stage 1 (``PipelineStage.communicate``) and stage 1 broadcasts the
logits to every rank (``PipelineStage.broadcast_from_last``), so ``generate()`` runs unchanged
on both.

Communication: NCCL when every rank has its own GPU; gloo on CPU, or with ``--share-gpu``
(every rank on cuda:0: two ranks can share one GPU only through gloo), where transformers
moves the tensors to the CPU for each transfer and calls no ``torch.cuda.synchronize()``.
The script starts the process group itself (transformers would otherwise), so that rank 0
can save the model once and tell the others where.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
from transformers.distributed import DistributedConfig


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--calls", type=int, default=3, help="generate() calls")
    p.add_argument("--new-tokens", type=int, default=8, help="tokens per generate() call")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--prompt", type=int, default=6, help="prompt length (token ids)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument(
        "--share-gpu",
        action="store_true",
        help="every rank on cuda:0 over gloo (two ranks on one GPU)",
    )
    return p.parse_args()


def start_process_group(share_gpu: bool) -> None:
    """NCCL when each rank has its own GPU; gloo otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if share_gpu:
        os.environ["LOCAL_RANK"] = "0"  # transformers binds cuda:LOCAL_RANK
    elif torch.cuda.is_available() and torch.cuda.device_count() >= world:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        return
    dist.init_process_group("gloo")


def saved_model(args: argparse.Namespace) -> str:
    """A small Llama with seeded random weights, saved where from_pretrained can load it."""
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    shared: list[str | None] = [None]
    if dist.get_rank() == 0:  # save_pretrained writes on rank 0 only
        torch.manual_seed(0)
        shared[0] = tempfile.mkdtemp(prefix="hf_pp_")
        LlamaForCausalLM(config).save_pretrained(shared[0])
    dist.broadcast_object_list(shared, src=0)
    assert shared[0] is not None
    return shared[0]


def main() -> None:
    args = parse()
    start_process_group(args.share_gpu)
    folder = saved_model(args)
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, distributed_config=DistributedConfig(pp_size=2)
    )
    model.eval()
    device = next(model.parameters()).device
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(1)
    for call in range(args.calls):
        prompt = torch.randint(1, args.vocab, (args.batch, args.prompt), generator=g)
        with torch.inference_mode():
            out = model.generate(
                prompt.to(device),
                attention_mask=torch.ones_like(prompt).to(device),
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                do_sample=False,
                pad_token_id=0,
            )
        if rank == 0:
            print(f"call {call}: {out[:, args.prompt :].tolist()}", flush=True)
    dist.barrier()
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
