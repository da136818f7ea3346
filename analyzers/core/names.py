"""Where profplug hooks into Megatron-Core: module, class and function names (stdlib only).

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
