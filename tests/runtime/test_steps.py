"""Step sources (Megatron auto steps < profplug.step() < --step-fn), the step ranges in a
Kineto trace, and MODULE:QUALNAME step functions (in one process, CPU)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap

import pytest
import torch
from profplug.analyzers.core import ranges

import profplug
import profplug.steps as steps
from profplug import autosteps
from profplug.config import parse_step_fn, parse_step_fns


class Events:
    """Records what the step listeners see."""

    def __init__(self) -> None:
        self.log: list[tuple] = []

    def begin(self, i: int) -> None:
        self.log.append(("begin", i))

    def end(self, i: int) -> None:
        self.log.append(("end", i))

    def switch(self, old: str, new: str, dropped: int) -> None:
        self.log.append(("switch", old, new, dropped))


@pytest.fixture
def events():
    steps._reset()
    ev = Events()
    steps.add_listener(ev.begin, ev.end, ev.switch)
    yield ev
    steps.remove_listener(ev.begin, ev.end, ev.switch)
    profplug.unpatch()
    steps._reset()


def auto(level: int):
    """A function whose calls are steps of source ``level`` (as a --step-fn or Megatron)."""
    target = autosteps.Target("t:f", level, "megatron" if level == steps.LIBRARY else None)

    def f(inner=None):
        return inner() if inner else None

    return autosteps.step_wrapper(f, target), target


def test_manual_steps_take_over_from_megatron_auto_steps(events) -> None:
    fwd, target = auto(steps.LIBRARY)
    fwd()
    fwd()
    assert steps.source() == "megatron" and steps.count() == 2
    for _ in range(3):
        with profplug.step():
            fwd()  # inside the job's own step: part of it, not a step
    fwd()  # after the job's first step(): ignored for good
    assert steps.source() == "manual" and steps.count() == 3 and target.calls == 6
    assert events.log == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1),
                          ("switch", "megatron", "manual", 2),
                          ("begin", 0), ("end", 0), ("begin", 1), ("end", 1),
                          ("begin", 2), ("end", 2)]


def test_auto_steps_never_start_once_the_job_stepped(events) -> None:
    fwd, _ = auto(steps.LIBRARY)
    profplug.step()
    fwd()
    profplug.step()
    steps.close_open()
    assert [e for e in events.log if e[0] == "switch"] == []
    assert events.log == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]


def test_step_fn_beats_manual_steps_and_nested_calls_are_one_step(events) -> None:
    fwd, _ = auto(steps.LIBRARY)
    decode, _ = auto(steps.STEP_FN)
    with profplug.step():
        pass
    decode(inner=fwd)  # the step-fn takes control; the Megatron call inside is part of it
    decode(inner=lambda: decode())  # recursion: one step
    profplug.step()  # the job's own step() no longer counts
    assert steps.count() == 2 and steps.source() == "step_fn"
    assert events.log == [("begin", 0), ("end", 0), ("switch", "manual", "step_fn", 1),
                          ("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]


def test_a_step_fn_inside_a_megatron_step_takes_over_that_step(events) -> None:
    fwd, _ = auto(steps.LIBRARY)
    layer, _ = auto(steps.STEP_FN)
    fwd(inner=layer)
    fwd(inner=layer)
    assert events.log == [("begin", 0), ("end", 0), ("switch", "megatron", "step_fn", 1),
                          ("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]


def test_calls_during_a_cuda_graph_capture_are_not_steps(events, monkeypatch) -> None:
    fwd, target = auto(steps.LIBRARY)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    fwd()  # e.g. the dynamic engine capturing its CUDA graphs
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    fwd()
    assert target.calls == 2 and events.log == [("begin", 0), ("end", 0)]


def test_a_failing_step_function_closes_its_step(events) -> None:
    def boom():
        raise ValueError("x")

    fwd, _ = auto(steps.STEP_FN)
    with pytest.raises(ValueError):
        fwd(inner=boom)
    fwd()
    assert events.log == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]


def test_async_step_function_is_one_step_until_its_coroutine_ends(events) -> None:
    target = autosteps.Target("t:g", steps.STEP_FN)

    async def engine_step():
        events.log.append(("work", steps.count()))
        await asyncio.sleep(0)
        events.log.append(("work", steps.count()))

    wrapped = autosteps.step_wrapper(engine_step, target)
    assert asyncio.iscoroutinefunction(wrapped)
    asyncio.run(wrapped())
    assert events.log == [("begin", 0), ("work", 1), ("work", 1), ("end", 0)]


def test_kineto_trace_has_profiler_step_and_profplug_step_once_per_step(events, tmp_path) -> None:
    fwd, _ = auto(steps.LIBRARY)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            fwd()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events_ = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    ann = sorted((e["ts"], e["name"], e["dur"]) for e in events_
                  if e.get("cat") == "user_annotation")
    names = [n for _, n, _ in ann]
    assert names == ["ProfilerStep#0", ranges.STEP, "ProfilerStep#1", ranges.STEP,
                     "ProfilerStep#2", ranges.STEP]
    for (t0, _, d0), (t1, _, d1) in zip(ann[::2], ann[1::2], strict=True):
        assert t0 <= t1 and t1 + d1 <= t0 + d0  # ProfilerStep#N encloses profplug.step


def test_attached_torch_profiler_names_its_own_steps(events, tmp_path) -> None:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        steps.attach(prof)
        try:
            for _ in range(2):
                with profplug.step():
                    pass
        finally:
            steps.detach(prof)
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    names = [e["name"] for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
             if e.get("cat") == "user_annotation"]
    assert names.count(ranges.STEP) == 2
    assert len([n for n in names if n.startswith("ProfilerStep#")]) <= 2  # torch's only


@pytest.mark.parametrize(("text", "ok"), [
    ("stepmod:decode", ("stepmod", "decode")),
    ("pkg.mod:Engine.step", ("pkg.mod", "Engine.step")),
    ("stepmod", None), ("stepmod:", None), (":f", None), ("a b:f", None),
    ("mod:f.<locals>.g", None), ("__main__:decode", ("__main__", "decode")),
    ("jobs/run.py:Engine.step", ("jobs/run.py", "Engine.step")), ("jobs/run:decode", None),
])
def test_parse_step_fn(text: str, ok) -> None:
    if ok is None:
        with pytest.raises(ValueError):
            parse_step_fn(text)
    else:
        assert parse_step_fn(text) == ok
    assert parse_step_fns(" a:f, b:C.m ,a:f") == ("a:f", "b:C.m")


STEPMOD = """
import functools
class Engine:
    def step(self, n):
        return n + 1
    @staticmethod
    def s(n):
        return n * 2
    @classmethod
    def c(cls, n):
        return cls.__name__ + str(n)
class Child(Engine):
    pass
def decode(x):
    '''decode doc'''
    return x
"""


@pytest.fixture
def stepmod(tmp_path, monkeypatch):
    name = f"stepmod_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(STEPMOD))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_step_fns_patch_on_import_and_unpatch(events, stepmod) -> None:
    specs = [f"{stepmod}:decode", f"{stepmod}:Engine.step", f"{stepmod}:Engine.s",
             f"{stepmod}:Child.c", f"{stepmod}:nothere", f"{stepmod}:decode.x"]
    profplug.patch(megatron=False, synchronize=False, step_fns=specs)
    assert stepmod not in sys.modules  # patched when imported, not before
    mod = __import__(stepmod)
    assert mod.decode.__doc__ == "decode doc" and mod.decode.__wrapped__ is not None
    assert mod.decode(5) == 5 and mod.Engine().step(1) == 2 and mod.Engine.s(3) == 6
    assert mod.Child.c(4) == "Child4" and mod.Engine.c(4) == "Engine4"
    assert isinstance(mod.Engine.__dict__["s"], staticmethod)
    assert "c" in mod.Child.__dict__  # an inherited method is wrapped on the named class
    assert not hasattr(mod.Engine.__dict__["c"].__func__, "__wrapped__")
    report = {t["name"].split(":")[1]: t for t in autosteps.targets()}
    assert {k: (v["patched"], v["calls"]) for k, v in report.items()} == {
        "decode": (True, 1), "Engine.step": (True, 1), "Engine.s": (True, 1),
        "Child.c": (True, 1), "nothere": (False, 0), "decode.x": (False, 0)}
    assert report["nothere"]["error"] == f"{stepmod} has no attribute 'nothere'"
    assert steps.count() == 4
    profplug.patch(megatron=False, synchronize=False, step_fns=specs)  # idempotent
    assert not hasattr(mod.decode.__wrapped__, "__wrapped__")
    profplug.unpatch()
    assert not hasattr(mod.decode, "__wrapped__") and "c" not in mod.Child.__dict__
    assert isinstance(mod.Engine.__dict__["s"], staticmethod)
    assert not hasattr(mod.Engine.__dict__["s"].__func__, "__wrapped__")
    assert autosteps.targets() == []
