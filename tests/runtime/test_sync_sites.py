"""Declared sync sites (``profplug.sites``) on a pipeline module built here: the policy applied
to the synchronizes inside a site and nowhere else, on a CUDA stub (the event policy's real
path needs a GPU); the site annotated; patched where imported by name; reversible."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch
from profplug.analyzers.core import ranges
from profplug.analyzers.core.errors import ProfplugError

import profplug
from profplug import policy, sites, syncpoint
from profplug.libraries import transformers_moved
from profplug.session.launch import RunOptions

PIPE = """
import torch
from torch.cuda import synchronize as sync_by_name


class Stage:
    def communicate(self, tensor, *, peer):
        # transformers: batch_isend_irecv, req.wait(), then a device-wide synchronize
        torch.cuda.synchronize()
        return tensor + 0


def send(tensor):
    torch.cuda.synchronize()
    sync_by_name()
    return tensor


def elsewhere():
    torch.cuda.synchronize()


def device_agnostic(tensor):
    torch.accelerator.synchronize()
    return tensor
"""


class FakeEvent:
    def __init__(self) -> None:
        self.streams: list[object] = []
        self.done = False

    def record(self, stream: object = None) -> None:
        self.streams.append(stream)

    def query(self) -> bool:
        return self.done


@pytest.fixture
def cuda(monkeypatch):
    """torch.cuda as if a GPU were in use: synchronizes counted, events and streams faked."""
    device_syncs: list[object] = []
    events: list[FakeEvent] = []

    def synchronize(device=None):
        device_syncs.append(device)

    def event():
        events.append(FakeEvent())
        return events[-1]

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(
        torch.accelerator,
        "synchronize",
        lambda device=None: device_syncs.append(("accelerator", device)),
    )
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: ("stream", device))
    monkeypatch.setattr(syncpoint, "_pending", type(syncpoint._pending)())
    monkeypatch.setattr(syncpoint, "_free_events", [])
    policy.reset()
    yield device_syncs, events
    profplug.unpatch()
    policy.reset()


@pytest.fixture
def pipe(cuda):
    """The module ``sitepipe`` (and ``siteuser``, which imported ``send`` by name)."""
    mod = types.ModuleType("sitepipe")
    exec(compile(PIPE, "sitepipe.py", "exec"), mod.__dict__)
    user = types.ModuleType("siteuser")
    user.send = mod.send
    sys.modules["sitepipe"], sys.modules["siteuser"] = mod, user
    yield mod, user, cuda
    sys.modules.pop("sitepipe", None)
    sys.modules.pop("siteuser", None)


def test_the_device_policy_keeps_a_sites_synchronizes(pipe) -> None:
    _, user, (device_syncs, events) = pipe
    profplug.sync_site("sitepipe:send")
    t = torch.ones(3)
    assert user.send(t) is t and len(device_syncs) == 2 and not events
    assert policy.counts()["device"] == {
        "p2p_calls": 1,
        "device_syncs": 2,
        "event_waits": 0,
        "current_policy_calls": 0,
    }


def test_the_event_policy_replaces_them_with_an_event_that_keeps_the_tensors(pipe) -> None:
    mod, _, (device_syncs, events) = pipe
    policy.set_policy("event")
    sites.declare("sitepipe:Stage.communicate")
    t = torch.ones(3)
    out = mod.Stage().communicate(t, peer=1)
    assert device_syncs == [] and len(events) == 1
    assert events[0].streams == [("stream", None)]  # on the current stream
    ((event, kept),) = syncpoint._pending
    assert event is events[0] and kept[0] is t and kept[1] is out  # argument and result
    assert policy.counts()["event"]["event_waits"] == 1
    events[0].done = True
    mod.Stage().communicate(t, peer=1)  # the completed event is reused, its tensors freed
    assert len(events) == 1 and len(syncpoint._pending) == 1


def test_the_none_policy_drops_them_and_synchronizes_elsewhere_stay(pipe) -> None:
    mod, _, (device_syncs, events) = pipe
    policy.set_policy("none")
    sites.declare("sitepipe:send")
    mod.send(torch.ones(2))
    assert device_syncs == [] and events == []
    mod.elsewhere()  # not a site: the job's own synchronize is kept under any policy
    assert device_syncs == [None]
    assert policy.counts()["none"] == {
        "p2p_calls": 1,
        "device_syncs": 0,
        "event_waits": 0,
        "current_policy_calls": 0,
    }


@pytest.mark.parametrize("sync", ["device", "event", "none"])
def test_torch_accelerator_synchronize_in_a_site_is_the_policys_too(pipe, sync) -> None:
    mod, _, (device_syncs, events) = pipe
    policy.set_policy(sync)
    sites.declare("sitepipe:device_agnostic")
    mod.device_agnostic(torch.ones(1))
    assert device_syncs == ([None] if sync == "device" else [])  # device: as torch.cuda's
    assert len(events) == (sync == "event")
    profplug.unpatch()
    torch.accelerator.synchronize()  # torch's again (the fixture's stand-in)
    assert device_syncs[-1] == ("accelerator", None)


def test_a_site_is_patched_where_imported_idempotently_and_reversibly(pipe) -> None:
    mod, user, (device_syncs, _) = pipe
    original, by_name = mod.send, mod.sync_by_name
    first = sites.declare("sitepipe:send")
    assert sites.declare("sitepipe:send") is first and first.patched
    assert mod.send is user.send and mod.send.__wrapped__ is original
    assert mod.sync_by_name is torch.cuda.synchronize  # profplug's, where imported by name
    assert torch.cuda.synchronize.__wrapped__ is by_name
    profplug.unpatch()
    assert mod.send is original and user.send is original
    assert torch.cuda.synchronize is by_name and mod.sync_by_name is by_name
    mod.send(torch.ones(1))
    assert len(device_syncs) == 2 and sites.states() == []


def test_an_inherited_method_is_patched_on_the_class_named_and_removed_after(pipe) -> None:
    mod, _, (device_syncs, _) = pipe
    mod.Sub = type("Sub", (mod.Stage,), {})
    policy.set_policy("none")
    sites.declare("sitepipe:Sub.communicate")
    t = torch.ones(2)
    mod.Sub().communicate(t, peer=0)
    mod.Stage().communicate(t, peer=0)  # the base class is not the site: its sync stays
    assert device_syncs == [None] and "communicate" in mod.Sub.__dict__
    profplug.unpatch()
    assert "communicate" not in mod.Sub.__dict__


def test_a_site_missing_from_its_module_says_so(pipe) -> None:
    state = sites.declare("sitepipe:recv")
    assert not state.patched and state.error == "sitepipe has no attribute 'recv'"
    assert sites.states() == [
        {
            "name": "sitepipe:recv",
            "origin": "declared",
            "patched": False,
            "calls": 0,
            "error": state.error,
        }
    ]


def test_a_site_is_annotated_with_its_name(pipe, tmp_path) -> None:
    mod, _, _ = pipe
    sites.declare("sitepipe:send")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        mod.send(torch.ones(1))
    names = {e.name for e in prof.events()}
    assert ranges.sync_site_range("sitepipe:send") in names and ranges.SYNC_DEVICE in names


def test_a_site_declared_before_its_module_is_imported_waits_for_it(
    cuda, tmp_path, monkeypatch
) -> None:
    (tmp_path / "latepipe.py").write_text(PIPE)
    monkeypatch.syspath_prepend(str(tmp_path))
    state = sites.declare("latepipe:send")
    assert not state.patched
    import latepipe

    try:
        assert state.patched and getattr(latepipe.send, "__profplug__", False)
    finally:
        sys.modules.pop("latepipe", None)


@pytest.mark.parametrize("spec", ["job.py:send", "__main__:send", "nocolon", "a:1x"])
def test_a_sync_site_that_is_no_module_function_is_a_one_line_error(spec) -> None:
    with pytest.raises(ProfplugError, match=r"^--sync-site: "):
        RunOptions(out=Path("o"), command=["x"], sync_sites=[spec]).config()


def test_sync_sites_reach_the_ranks_through_the_environment() -> None:
    from profplug.config import Config

    cfg = RunOptions(out=Path("o"), command=["x"], sync_sites=["a.b:f", "c:K.m", "a.b:f"]).config()
    assert cfg.sync_sites == ("a.b:f", "c:K.m")
    assert Config.from_env(cfg.to_env()).sync_sites == ("a.b:f", "c:K.m")


def test_a_transformers_whose_pipeline_moved_gets_one_line(tmp_path) -> None:
    moved = types.SimpleNamespace(__version__="6.1.0", __file__=str(tmp_path / "__init__.py"))
    line = transformers_moved(moved)
    assert line is not None and "\n" not in line
    assert line.startswith(
        "profplug: transformers 6.1.0: no "
        "transformers.distributed.pipeline_parallel (profplug reads "
        "transformers 5.23, 5.24, 5.25)"
    )
    assert transformers_moved(types.SimpleNamespace(__version__="5.24.1", __file__="")) is None
    (tmp_path / "distributed").mkdir()
    (tmp_path / "distributed" / "pipeline_parallel.py").write_text("")
    assert transformers_moved(moved) is None  # still where profplug reads it: patched


def test_a_job_importing_a_moved_transformers_is_told_in_one_line(tmp_path) -> None:
    """profplug's start-up hook in a process that imports a transformers without the
    pipeline module profplug reads (a fake one here; no torch needed)."""
    import os
    import subprocess

    from profplug.session.launch import SITECUSTOMIZE_DIR

    pkg = tmp_path / "transformers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__version__ = '6.1.0'\n")
    env = {
        **os.environ,
        "PYTHONPATH": f"{SITECUSTOMIZE_DIR}{os.pathsep}{tmp_path}",
        "PROFPLUG_OUT": str(tmp_path / "out"),
    }
    env.pop("PROFPLUG_OWNER_PID", None)
    res = subprocess.run(
        [sys.executable, "-c", "import transformers"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    fake = types.SimpleNamespace(__version__="6.1.0", __file__=str(pkg / "__init__.py"))
    assert res.stderr.splitlines() == [transformers_moved(fake)]


class _OnDevice(torch.Tensor):
    """A CPU tensor that stays put when asked to move (``.to(cuda)`` on a CPU build)."""

    def to(self, *args, **kwargs):
        return self


@pytest.mark.parametrize("sync", ["device", "event", "none"])
def test_transformers_communicate_follows_the_policy_on_a_cuda_stub(
    cuda, monkeypatch, sync
) -> None:
    """transformers' own ``PipelineStage.communicate`` (its NCCL path: the device is CUDA),
    with torch.distributed faked where it names it: the synchronize it makes after the wait
    is the policy's; the call is named as Megatron's send, with the peer's global rank."""
    pp = pytest.importorskip("transformers.distributed.pipeline_parallel")
    from profplug import libraries
    from profplug.patching import patch_library

    device_syncs, events = cuda
    waits: list[int] = []
    work = types.SimpleNamespace(wait=lambda: waits.append(1))
    fake_dist = types.SimpleNamespace(
        P2POp=lambda op, tensor, peer, group=None: (op, tensor, peer),
        isend="isend",
        irecv="irecv",
        get_global_rank=lambda group, rank: rank + 4,
        batch_isend_irecv=lambda ops: [work],
    )
    monkeypatch.setattr(pp, "dist", fake_dist)
    monkeypatch.setattr(torch.distributed, "get_global_rank", fake_dist.get_global_rank)
    monkeypatch.setattr(libraries, "_named", {})
    original = pp.PipelineStage.__dict__["communicate"]
    patch_library("transformers", steps=False)
    patch_library("transformers", steps=False)  # idempotent: wrapped once
    assert pp.PipelineStage.__dict__["communicate"].__wrapped__ is original
    stage = pp.PipelineStage.__new__(pp.PipelineStage)
    stage.__dict__.update(
        pp_rank=0,
        pp_size=2,
        pp_group=object(),
        pp_is_first_stage=True,
        pp_is_last_stage=False,
        pp_prev_rank=None,
        pp_next_rank=1,
        comm_on_cpu=False,
    )
    hidden = torch.Tensor._make_subclass(_OnDevice, torch.ones(2, 3))
    policy.set_policy(sync)
    assert (
        stage.communicate(
            "send_forward", device=torch.device("cuda", 0), dtype=torch.float32, tensor=hidden
        )
        is None
    )
    assert waits == [1]  # transformers waited, then synchronized as the policy says
    assert len(device_syncs) == (sync == "device") and len(events) == (sync == "event")
    if sync == "event":
        ((_, kept),) = syncpoint._pending
        assert any(t is hidden for t in kept)
    (rng,) = (r for _, r in libraries._named.values())
    assert rng.name == "profplug.send_to_next_pipeline_rank peer=5"
    assert policy.counts()[sync]["p2p_calls"] == 1
    profplug.unpatch()
    assert pp.PipelineStage.__dict__["communicate"] is original
