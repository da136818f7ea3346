"""Megatron-Core auto steps on the real 0.16.1 inference wrapper classes: the patch targets
AbstractModelInferenceWrapper and every override of run_one_forward_step (VLM's, and
subclasses created later), and each outermost call is one step."""

from __future__ import annotations

import importlib

import pytest
import torch
from shared_jobs import megatron_start_up

import profplug
import profplug.steps as steps

AMIW = "megatron.core.inference.model_inference_wrappers.abstract_model_inference_wrapper"
GPT = "megatron.core.inference.model_inference_wrappers.gpt.gpt_inference_wrapper"
VLM = "megatron.core.inference.model_inference_wrappers.multimodal.vlm_inference_wrapper"
METHOD = "run_one_forward_step"


@pytest.fixture
def mw():
    pytest.importorskip(AMIW)
    steps._reset()
    yield importlib.import_module(AMIW), importlib.import_module(GPT)
    profplug.unpatch()
    steps._reset()


class _Group:
    """A one-rank pipeline group (first and last stage): the non-PP forward path."""

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 1


class _Context:
    def __init__(self) -> None:
        self.offset = 0

    def increment_sequence_len_offset(self, n: int) -> None:
        self.offset += n


def stub_wrapper(base: type) -> type:
    """``base`` (a real Megatron wrapper class) with the model and its set-up stubbed; its
    run_one_forward_step is inherited, i.e. whatever the patch made of it."""

    class Stub(base):
        def __init__(self) -> None:  # the real one needs a GPTModel and process groups
            self.pp_group = _Group()
            self.inference_context = _Context()
            self.forwards = 0

        def _forward(self, inference_input):
            self.forwards += 1
            return inference_input["tokens"].float() * 2

    return Stub


def test_run_one_forward_step_is_one_step_per_outermost_call(mw) -> None:
    amiw, gpt = mw
    base = amiw.AbstractModelInferenceWrapper
    original, original_dummy = base.__dict__[METHOD], base.__dict__["dummy_forward"]
    profplug.patch(megatron=True, synchronize=False)
    patched = base.__dict__[METHOD]
    assert patched is not original and patched.__wrapped__ is original
    assert patched.__name__ == METHOD and patched.__doc__ == original.__doc__
    assert METHOD not in gpt.GPTInferenceWrapper.__dict__  # inherits the patched one

    stub = stub_wrapper(gpt.GPTInferenceWrapper)()
    tokens = torch.arange(6).view(2, 3)
    for _ in range(3):
        out = stub.run_one_forward_step({"tokens": tokens})
    assert torch.equal(out, tokens.float() * 2) and stub.inference_context.offset == 9
    assert steps.source() == "megatron" and steps.count() == 3

    class Override(stub_wrapper(gpt.GPTInferenceWrapper)):  # created while patched
        def run_one_forward_step(self, inference_input, recv_buffer_seq_len=None):
            return super().run_one_forward_step(inference_input)  # nested: same step

    assert Override.__dict__[METHOD].__wrapped__ is not None
    Override().run_one_forward_step({"tokens": tokens})
    assert steps.count() == 4

    dummy = base.__dict__["dummy_forward"]  # an EP rank without requests: a step too
    assert dummy.__wrapped__ is original_dummy and dummy.__name__ == "dummy_forward"

    profplug.patch(megatron=True, synchronize=False)  # idempotent
    assert base.__dict__[METHOD].__wrapped__ is original
    profplug.unpatch()
    assert base.__dict__[METHOD] is original and "__init_subclass__" not in base.__dict__
    assert base.__dict__["dummy_forward"] is original_dummy
    assert not hasattr(Override.__dict__[METHOD], "__wrapped__")
    stub.run_one_forward_step({"tokens": tokens})
    assert steps.count() == 4


def test_vlm_override_is_patched_when_imported_after_the_patch(tmp_path_factory) -> None:
    """In a fresh process, under the start-up hook (``jobs/megatron_start_up.py``, shared with
    test_patch.py): Megatron-Core patched first, then the VLM wrapper imported (it defines its
    own run_one_forward_step); the class-creation hook wraps it, unpatch unwraps it."""
    pytest.importorskip(AMIW)
    lines, _ = megatron_start_up(tmp_path_factory)
    assert lines[1:] == [["base", "True"], ["vlm", "True"], ["after", "False"]]


def test_job_steps_win_over_megatron_steps(mw) -> None:
    _, gpt = mw
    profplug.patch(megatron=True, synchronize=False)
    stub = stub_wrapper(gpt.GPTInferenceWrapper)()
    tokens = torch.ones(1, 2)
    stub.run_one_forward_step({"tokens": tokens})  # a warm-up call: an auto step
    for _ in range(2):
        with profplug.step():
            stub.run_one_forward_step({"tokens": tokens})
            stub.run_one_forward_step({"tokens": tokens})
    assert steps.source() == "manual" and steps.count() == 2 and stub.forwards == 5
