"""Where profplug hooks into Megatron-Core and transformers: module, class and function names
(stdlib only).

Shared by the p2p patch (:mod:`profplug.patching`), the automatic steps
(:mod:`profplug.autosteps`) and the start-up hooks (:mod:`profplug.session.bootstrap`).
"""

from __future__ import annotations

MEGATRON_MODULE = "megatron.core.inference.communication_utils"
FUNCTIONS = (
    "send_to_next_pipeline_rank",
    "recv_from_prev_pipeline_rank_",
    "broadcast_from_last_pipeline_stage",
)
MEGATRON_WRAPPER_MODULE = (
    "megatron.core.inference.model_inference_wrappers.abstract_model_inference_wrapper"
)
MEGATRON_WRAPPER_CLASS = "AbstractModelInferenceWrapper"
MEGATRON_STEP_METHODS = ("run_one_forward_step", "dummy_forward")

# Hugging Face transformers' native pipeline-parallel inference (``DistributedConfig(pp_size=N)``)
TRANSFORMERS_MODULE = "transformers.distributed.pipeline_parallel"
TRANSFORMERS_STAGE_CLASS = "PipelineStage"
TRANSFORMERS_P2P = "communicate"  # one batch_isend_irecv, req.wait(), torch.cuda.synchronize()
TRANSFORMERS_BROADCAST = "broadcast_from_last"  # the logits from the last stage to every rank
TRANSFORMERS_STEP_FN = "pipeline_parallel_naive_forward"  # once per model forward, every rank
TRANSFORMERS_SUPPORTED = ("5.23", "5.24", "5.25")  # major.minor read and tested
