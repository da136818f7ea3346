"""Greedy decoding of a small Megatron-Core GPT through Megatron's own inference wrapper.

    .venv/bin/torchrun --nproc-per-node 2 examples/megatron_gpt_infer.py --steps 64
    .venv/bin/profplug run -o runs/mcore --sync event -- .venv/bin/torchrun --nproc-per-node 2 \\
        examples/megatron_gpt_infer.py

This script never imports profplug (unless ``--sync`` asks it to patch Megatron itself): it
is what a user's own Megatron inference script looks like. Under ``profplug run`` the patch
is applied at start-up and every ``run_one_forward_step`` call is a step (Megatron
auto-steps), so the report is per token with no change here.

GPUs only (NCCL, one per rank, pipeline size = world size; one GPU works with
``--nproc-per-node 1``). The model is a GPTModel with ``get_gpt_layer_local_spec()`` and
``AttnBackend.local`` in fp32 (bf16 params failed on the first stage with Megatron-Core
0.16.1), built after seeding so every run has the same weights. Each step runs
``GPTInferenceWrapper.run_one_forward_step`` (which calls ``recv_from_prev_pipeline_rank_`` /
``send_to_next_pipeline_rank``) and Megatron's ``broadcast_from_last_pipeline_stage`` for the
logits, as the static-batch text generation controller does, so the functions profplug
patches are the ones that run. Standalone, ``--sync`` patches Megatron with ``profplug.p2p``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from megatron.core import parallel_state
from megatron.core.inference import communication_utils as comm
from megatron.core.inference.contexts import StaticInferenceContext
from megatron.core.inference.model_inference_wrappers.gpt.gpt_inference_wrapper import (
    GPTInferenceWrapper,
)
from megatron.core.inference.model_inference_wrappers.inference_wrapper_config import (
    InferenceWrapperConfig,
)
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
from megatron.core.transformer.enums import AttnBackend
from megatron.core.transformer.transformer_config import TransformerConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Megatron-Core GPT PP decode for profplug")
    ap.add_argument("--steps", type=int, default=64, help="tokens to generate")
    ap.add_argument("--prompt", type=int, default=16, help="prompt length (tokens)")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layers", type=int, default=8, help="layers in the whole model")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--sync", choices=["device", "event", "none"], default=None,
                    help="patch Megatron with profplug.p2p using this policy")
    return ap.parse_args(argv)


def build(args: argparse.Namespace, world: int) -> tuple:
    """Model-parallel state, the GPT stage of this rank and its inference wrapper."""
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=world
    )
    torch.manual_seed(args.seed)
    model_parallel_cuda_manual_seed(args.seed)
    max_len = args.prompt + args.steps + 1
    config = TransformerConfig(
        num_layers=args.layers,
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        use_cpu_initialization=True,
        params_dtype=torch.float32,
        pipeline_dtype=torch.float32,
        pipeline_model_parallel_size=world,
        attention_backend=AttnBackend.local,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    model = GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=args.vocab,
        max_sequence_length=max_len,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
    ).cuda().eval()
    wrapper_config = InferenceWrapperConfig(
        hidden_size=args.hidden,
        params_dtype=torch.float32,
        inference_batch_times_seqlen_threshold=-1,  # never split into micro-batches
        padded_vocab_size=args.vocab,
        inference_max_requests=args.batch,
        inference_max_seq_length=max_len,
    )
    context = StaticInferenceContext(args.batch, max_len)
    wrapper = GPTInferenceWrapper(model, wrapper_config, context)
    wrapper.prep_model_for_inference()
    return parallel_state, wrapper, context, max_len


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("megatron_gpt_infer.py needs CUDA GPUs (NCCL, one per rank); "
                 "use examples/infer.py on a CPU")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    if args.sync is not None:  # standalone A/B without profplug run
        import profplug
        from profplug import p2p

        profplug.patch(megatron=True, synchronize=False)
        p2p.set_default_sync(args.sync)
    ps, wrapper, context, max_len = build(args, world)
    g = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.zeros(args.batch, max_len, dtype=torch.long)
    tokens[:, : args.prompt] = torch.randint(0, args.vocab, (args.batch, args.prompt), generator=g)
    tokens = tokens.cuda()
    inference_input = wrapper.prep_inference_input(tokens)
    start, end, step_s = 0, args.prompt, []
    with torch.inference_mode():
        for _ in range(args.steps):
            t0 = time.perf_counter()
            window = wrapper.get_batch_for_context_window(inference_input, start, end)
            logits = wrapper.run_one_forward_step(window)
            if logits is not None:  # last stage: keep only the last token's logits
                logits = logits[:, -1:, :].contiguous()
            # [batch, 1, vocab] from the last stage to every stage (a no-op copy at PP=1)
            logits = comm.broadcast_from_last_pipeline_stage(
                [args.batch, 1, args.vocab], torch.float32, logits, wrapper.pp_group
            )
            tokens[:, end] = logits[:, -1, :].argmax(-1)
            context.enable_decode_mode()
            start, end = end, end + 1
            step_s.append(time.perf_counter() - t0)
    if rank == 0:
        half = step_s[len(step_s) // 2 :]
        patched = getattr(comm.send_to_next_pipeline_rank, "__profplug__", False)
        sync = os.environ.get("PROFPLUG_SYNC") or args.sync or "device"
        sync = sync if patched else "megatron (unpatched)"
        print(f"megatron_gpt_infer: world={world} sync={sync} "
              f"steps={args.steps} mean_step_us={1e6 * sum(half) / max(len(half), 1):.1f}")
        out = tokens[:, args.prompt : end].cpu()
        for b in range(out.shape[0]):
            print(f"tokens[{b}]: " + " ".join(str(int(t)) for t in out[b]))
    ps.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
