"""``--step-fn`` on modules that are half-built when profplug first sees them, and what
``profplug run`` says about step functions and a window that never opens (in-process: no
job is launched; ``test_step_fn_shapes.py`` runs real jobs)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import profplug
import profplug.autosteps as autosteps
import profplug.steps as steps
from profplug import hooks
from profplug.session import outcome


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


@pytest.fixture
def modroot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path; every module imported from it is forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if getattr(sys.modules[name], "__file__", "") and str(tmp_path) in str(
                sys.modules[name].__file__):
            del sys.modules[name]
    steps._reset()


def test_a_half_built_module_is_patched_when_its_body_has_finished(modroot) -> None:
    """Given a module whose body starts profplug (as its own ``import torch`` starts the
    session) before it defines its class, when profplug asks for ``Engine.step`` then, the
    function is wrapped once the body has finished, not reported missing."""
    _write(modroot, {
        "halfstart.py": """
            from profplug import autosteps
            autosteps.patch_step_fn("halfmod:Engine.step")  # the session starts here
            """,
        "halfmod.py": """
            import halfstart  # the job's 'import torch': profplug starts, halfmod half-built
            import functools
            def logged(fn):
                @functools.wraps(fn)
                def inner(*a, **k):
                    return fn(*a, **k)
                return inner
            class Engine:
                @logged
                def step(self, n):
                    return n + 1
            """,
    })
    try:
        hooks.when_imported("halfmod", lambda m: None)  # the bootstrap's watch of MODULE
        mod = __import__("halfmod")
        (t,) = [t for t in autosteps.targets() if t["name"] == "halfmod:Engine.step"]
        assert (t["patched"], t["error"], t["where"]) == (True, None, "module")
        n = steps.count()
        assert mod.Engine().step(1) == 2 and mod.Engine().step(2) == 3
        assert steps.count() == n + 2
        (t,) = autosteps.targets()
        assert t["calls"] == 2
    finally:
        profplug.unpatch()


def test_a_submodule_of_torch_waits_for_torch_others_do_not_wait(
        modroot, monkeypatch) -> None:
    """Given callbacks on submodules that their packages import in the middle of their
    bodies: under torch (``torch.distributed``; here a package standing in for torch) the
    callback runs once torch has finished, since profplug's callbacks import torch; under any
    other package it runs right after the submodule's body, before the package can bind its
    names."""
    _write(modroot, {
        "faketorch/__init__.py": "from faketorch import distributed\nLATER = 1\n",
        "faketorch/distributed.py": "def send():\n    return 'sent'\n",
        "otherpkg/__init__.py": "from otherpkg import sub\nLATER = 1\n",
        "otherpkg/sub.py": "def send():\n    return 'sent'\n",
    })
    monkeypatch.setattr(hooks, "ALWAYS_WAIT_FOR", ("faketorch",))
    seen: list[tuple[str, bool]] = []
    for pkg in ("faketorch", "otherpkg"):
        sub = "distributed" if pkg == "faketorch" else "sub"
        hooks.when_imported(f"{pkg}.{sub}", lambda m: seen.append(
            (m.__name__, hasattr(sys.modules[m.__name__.partition(".")[0]], "LATER"))))
    __import__("faketorch")
    __import__("otherpkg")
    assert seen == [("faketorch.distributed", True), ("otherpkg.sub", False)]
    assert hooks.blocked("faketorch.distributed") is False


def _rank(rank: int, *, mode: str | None = "steps", first: int | None = None, seen: int = 0,
          source: str | None = "step_fn", fns: list[dict] | None = None) -> dict:
    return {"rank": rank, "status": "finished", "step_fns": fns or [],
            "window": {"mode": mode, "first_step": first, "skip": 100, "steps_seen": seen,
                       "step_source": source}}


def test_a_window_past_the_end_of_the_job_is_explained() -> None:
    ranks = [_rank(0, seen=20), _rank(1, seen=20)]
    assert outcome.window_problem(ranks, {"skip": 100, "step_fns": []}) == (
        "the window never opened: the job ran 20 steps (step_fn steps); the window starts "
        "at step 100 (--skip 100)")


def test_no_step_at_all_names_every_source() -> None:
    fns = [{"name": "m:f", "patched": True, "calls": 0, "error": None}]
    ranks = [_rank(0, mode=None, source=None, fns=fns)]
    assert outcome.window_problem(ranks, {"skip": 10, "step_fns": ["m:f"],
                                          "patches": "megatron,synchronize"}) == (
        "the window never opened: no step: no profplug.step, no Megatron step, --step-fn "
        "m:f: never called; and no profplug p2p or synchronize call to record the whole run "
        "from")


@pytest.mark.parametrize("ranks", [
    [_rank(0, first=100, seen=120)],  # opened
    [_rank(0, mode="run", source=None)],  # no step, but a whole-run recording
    [],  # no rank reported: said elsewhere
])
def test_no_window_problem_when_a_window_opened(ranks) -> None:
    assert outcome.window_problem(ranks, {"skip": 100}) is None


def test_step_fn_summary_per_target() -> None:
    ranks = [_rank(0, fns=[{"name": "a:f", "patched": True, "calls": 3, "where": "script"},
                           {"name": "b:g", "patched": False, "calls": 0,
                            "error": "b has no attribute 'g'", "where": "module"}]),
             _rank(1, fns=[{"name": "a:f", "patched": True, "calls": 4, "where": "script"}])]
    assert outcome.step_fn_summary(["a:f", "b:g", "c:h"], ranks) == [
        {"name": "a:f", "patched": True, "patched_ranks": [0, 1], "calls": 7,
         "where": "script", "why_not": None},
        {"name": "b:g", "patched": False, "patched_ranks": [], "calls": 0, "where": "module",
         "why_not": "b has no attribute 'g'"},
        {"name": "c:h", "patched": False, "patched_ranks": [], "calls": 0, "where": None,
         "why_not": "no rank reported on it (did any rank import torch?)"},
    ]
