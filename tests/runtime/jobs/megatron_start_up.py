"""A fresh process under profplug's start-up hook (PYTHONPATH = the sitecustomize folder) that
imports Megatron-Core's inference modules, then the VLM wrapper, then unpatches: each line
says what the patches reached at that point (read by ``test_patch.py`` and
``test_megatron_steps.py``; one Megatron-Core import for both)."""

import importlib
import sys

assert "torch" not in sys.modules
AMIW = "megatron.core.inference.model_inference_wrappers.abstract_model_inference_wrapper"
CU = "megatron.core.inference.communication_utils"
VLM = "megatron.core.inference.model_inference_wrappers.multimodal.vlm_inference_wrapper"
METHOD = "run_one_forward_step"
wrapper, comm = importlib.import_module(AMIW), importlib.import_module(CU)
import torch  # noqa: E402

print("hook", wrapper.recv_from_prev_pipeline_rank_ is comm.recv_from_prev_pipeline_rank_,
      getattr(comm.send_to_next_pipeline_rank, "__profplug__", False),
      getattr(torch.cuda.synchronize, "__profplug__", False))
assert VLM not in sys.modules
print("base", hasattr(getattr(wrapper.AbstractModelInferenceWrapper, METHOD), "__wrapped__"))
vlm = importlib.import_module(VLM).VLMInferenceWrapper  # its own run_one_forward_step
print("vlm", hasattr(vlm.__dict__[METHOD], "__wrapped__"))
import profplug  # noqa: E402

profplug.unpatch()
print("after", hasattr(vlm.__dict__[METHOD], "__wrapped__"))
