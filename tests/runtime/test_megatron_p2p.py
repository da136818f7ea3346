"""The patched Megatron-Core functions move data on gloo ranks with Megatron's own
``parallel_state`` (pp_group=None) and with the wrapper's pp_group."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from runtime._dist import run_ranks

CU = "megatron.core.inference.communication_utils"
MW = "megatron.core.inference.model_inference_wrappers.abstract_model_inference_wrapper"
PS = "megatron.core.parallel_state"


def _megatron_ranks(rank: int, world: int) -> None:
    import importlib

    import profplug

    ps = importlib.import_module(PS)
    comm = importlib.import_module(CU)
    wrapper = importlib.import_module(MW)
    ps.initialize_model_parallel(pipeline_model_parallel_size=world)
    profplug.patch(megatron=True, synchronize=False)
    group = ps.get_pipeline_model_parallel_group()
    for policy in ("device", "event", "none"):
        from profplug import p2p

        p2p.set_default_sync(policy)
        for step, pp_group in enumerate([None, group, None, group]):
            buf = torch.empty(3, 4)
            sent = torch.full((3, 4), float(rank * 100 + step))
            if rank == 0:
                wrapper.send_to_next_pipeline_rank(sent, pp_group)
                wrapper.recv_from_prev_pipeline_rank_(buf, pp_group)
            else:
                wrapper.recv_from_prev_pipeline_rank_(buf, pp_group)
                wrapper.send_to_next_pipeline_rank(sent, pp_group)
            assert torch.equal(buf, torch.full((3, 4), float(((rank - 1) % world) * 100 + step)))
            last = rank == world - 1
            t = torch.arange(6.0).view(2, 3) + step if last else None
            out = comm.broadcast_from_last_pipeline_stage([2, 3], torch.float32, t, pp_group)
            assert torch.equal(out, torch.arange(6.0).view(2, 3) + step)
    profplug.unpatch()
    ps.destroy_model_parallel()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("megatron") is None,
                    reason="Megatron-Core is not installed")
def test_patched_megatron_functions_on_gloo_ranks() -> None:
    # only the ranks import Megatron-Core (forked from a server that imported it, when this
    # test starts the server), not this process
    run_ranks(2, _megatron_ranks, preload=[PS, CU, MW])
