"""profplug.patch/unpatch on the real Megatron-Core package and on torch.cuda.synchronize."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
import torch
from profplug.analyzers.core import ranges
from shared_jobs import megatron_start_up

import profplug

MW = "megatron.core.inference.model_inference_wrappers.abstract_model_inference_wrapper"
CU = "megatron.core.inference.communication_utils"
NAMES = ("send_to_next_pipeline_rank", "recv_from_prev_pipeline_rank_",
         "broadcast_from_last_pipeline_stage")


@pytest.fixture
def megatron():
    comm = pytest.importorskip(CU)
    wrapper = importlib.import_module(MW)
    yield comm, wrapper
    profplug.unpatch()


def test_patch_replaces_megatron_functions_and_imported_names(megatron) -> None:
    comm, wrapper = megatron
    originals = {n: getattr(comm, n) for n in NAMES}
    imported = {n: wrapper.__dict__.get(n) for n in NAMES}

    profplug.patch(megatron=True, synchronize=False)

    for name in NAMES:
        new = getattr(comm, name)
        assert new is not originals[name] and new.__wrapped__ is originals[name]
        assert new.__name__ == name and new.__doc__ == originals[name].__doc__
        if imported[name] is not None:  # the wrapper imported send/recv by name
            assert wrapper.__dict__[name] is new
    assert wrapper.send_to_next_pipeline_rank is comm.send_to_next_pipeline_rank

    profplug.patch(megatron=True, synchronize=False)  # idempotent: no double wrapping
    assert comm.send_to_next_pipeline_rank.__wrapped__ is originals[NAMES[0]]

    profplug.unpatch()
    for name in NAMES:
        assert getattr(comm, name) is originals[name]
        assert wrapper.__dict__.get(name) is imported[name]
    profplug.unpatch()  # idempotent


def test_synchronize_wrapper_names_its_call_site_and_unpatches() -> None:
    original = torch.cuda.synchronize
    profplug.patch(megatron=False, synchronize=True)
    try:
        assert torch.cuda.synchronize is not original
        assert torch.cuda.synchronize.__wrapped__ is original
        profplug.patch(megatron=False, synchronize=True)
        assert torch.cuda.synchronize.__wrapped__ is original
        from profplug import p2p

        assert p2p.original_synchronize() is original
    finally:
        profplug.unpatch()
    assert torch.cuda.synchronize is original


def test_synchronize_range_in_trace(tmp_path) -> None:
    """On a CPU build the wrapped call raises inside its range; the range still closes."""
    profplug.patch(megatron=False, synchronize=True)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            line = sys._getframe().f_lineno + 2
            try:
                torch.cuda.synchronize()
            except (AssertionError, RuntimeError):
                pass
        prof.export_chrome_trace(str(tmp_path / "t.json"))
    finally:
        profplug.unpatch()
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    want = ranges.synchronize_range(
        "tests/runtime/test_patch.py", line, "test_synchronize_range_in_trace"
    )
    assert want in names, names


def test_missing_megatron_gives_a_clear_error() -> None:
    code = (
        "import sys; sys.modules['megatron']=None\n"
        "import profplug\n"
        "from profplug.patching import MegatronNotFoundError\n"
        "try:\n    profplug.patch(megatron=True, synchronize=False)\n"
        "except MegatronNotFoundError as e:\n    print('ERR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "ERR cannot patch Megatron-Core" in out.stdout
    assert "profplug.patch(megatron=False)" in out.stdout


def test_import_profplug_does_not_import_torch() -> None:
    code = "import sys, profplug, profplug.config; print('torch' in sys.modules, 'nvtx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_megatron_example_imports_and_fails_clearly_without_cuda() -> None:
    import torch as _torch

    if _torch.cuda.is_available():
        pytest.skip("has CUDA: the example would run")
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "megatron_gpt_infer.py"
    res = subprocess.run([sys.executable, str(script), "--steps", "2"], capture_output=True,
                         text=True)
    assert res.returncode == 1 and "needs CUDA GPUs" in res.stderr


def test_startup_hook_patches_megatron_when_the_job_imports_it(tmp_path_factory) -> None:
    """A fresh process under the start-up hook imports Megatron-Core's inference modules
    before torch (``jobs/megatron_start_up.py``, shared with test_megatron_steps.py)."""
    pytest.importorskip(CU)
    lines, out = megatron_start_up(tmp_path_factory)
    assert lines[0] == ["hook", "True", "True", "True"]
    assert (out / "status" / "rank0.json").exists()


def test_megatron_example_is_a_script_that_never_imports_profplug() -> None:
    """The Megatron example stands for a user's own script: profplug reaches it only from
    outside (profplug run's start-up patch and auto-steps), except for its opt-in --sync."""
    import ast
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "megatron_gpt_infer.py"
    tree = ast.parse(script.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
    assert names and not [n for n in names if n.split(".")[0] == "profplug"]
    assert "profplug.step" not in script.read_text()
