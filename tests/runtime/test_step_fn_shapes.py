"""``profplug run --step-fn`` on the module shapes users write, the observer effect, and a
window that never opens: real jobs (CPU, gloo) that never import profplug.

Three launches check everything (runtime tests are slow):
- a 2-rank gloo job under torchrun whose step is its own ``__main__:decode_step`` (called from
  ``main()`` under ``if __name__ == "__main__":``), that imports a nested package's engine
  (imports torch first, then a decorator and a class) *before* torch, with
  ``Engine.step`` and ``torch.distributed:broadcast`` named too;
- ``python -m shapes_main`` with its own function named by the module name and by file path,
  and ``--skip`` past the end of the job;
- ``python shapes_main.py`` with a ``--step-fn`` that is never called.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profplug.session.outcome import NO_WINDOW_EXIT

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs"
# torchrun as a module of this interpreter (a copied venv's torchrun script may name another)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]


def profplug_run(out: Path, *args: str, job: list[str], cwd: Path = ROOT
                 ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "profplug", "run", "-o", str(out), *args,
                           "--", *job], capture_output=True, text=True, cwd=cwd, timeout=300)


def step_numbers(path: Path) -> list[int]:
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    return [int(m.group(1)) for e in events if e.get("cat") == "user_annotation"
            if (m := re.fullmatch(r"ProfilerStep#(\d+)", e["name"]))]


@pytest.mark.slow
def test_script_function_half_built_module_and_torch_function_under_torchrun(tmp_path) -> None:
    out = tmp_path / "o"
    res = profplug_run(out, "--skip", "6", "--steps", "4",
                       "--step-fn", "__main__:decode_step",
                       "--step-fn", "shapepkg.inner.engine:Engine.step",
                       "--step-fn", "torch.distributed:broadcast",
                       job=[*TORCHRUN, str(JOBS / "shapes_job.py"), "--tokens", "15"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "partially initialized" not in res.stderr
    run = json.loads((out / "run.json").read_text())
    # per target: patched on both ranks, every call seen (15 tokens x 2 ranks), why not: none
    assert [(t["name"], t["patched"], t["patched_ranks"], t["calls"], t["where"], t["why_not"])
            for t in run["step_fns"]] == [
        ("__main__:decode_step", True, [0, 1], 30, "script", None),
        ("shapepkg.inner.engine:Engine.step", True, [0, 1], 30, "module", None),
        ("torch.distributed:broadcast", True, [0, 1], 30, "module", None)]
    assert run["warnings"] == [] and run["no_window"] is None
    for r in run["ranks"]:
        w = r["window"]
        # the script's function is the step; the nested calls are part of it
        assert (w["step_source"], w["first_step"], w["steps"], w["steps_seen"]) == (
            "step_fn", 6, 4, 15)
        assert step_numbers(out / "kineto" / f"rank{r['rank']}.json.gz") == [6, 7, 8, 9]
        # observer effect: untraced steps 3-4 (after the warm-up; 5 prepares the profiler)
        # and 11-14 (10 waits for the peers' trace writes), timed as the window
        u = r["untraced"]
        assert (u["before"]["steps"], u["after"]["steps"], r["timing"]["steps"]) == (2, 4, 4)
        assert u["before"]["clock"] == u["after"]["clock"] == r["timing"]["clock"] == "host"
    obs = run["observer"]
    assert obs["untraced_from"] == "after"  # 2 steps before the window: too few alone
    line = (f"traced steps: median {obs['traced_us']:,.1f} us; untraced (after the window): "
            f"{obs['untraced_us']:,.1f} us ({obs['overhead_pct']:+.1f}%)")
    assert obs["line"] == line and f"profplug: {line}" in res.stderr
    assert f"observer effect: {line}" in res.stdout  # the report's table
    assert f"observer effect: {line}" in (out / "report.html").read_text()


@pytest.mark.slow
def test_python_m_script_function_and_a_skip_past_the_end(tmp_path) -> None:
    out = tmp_path / "o"
    res = profplug_run(out, "--skip", "100", "--steps", "4",
                       "--step-fn", "shapes_main:decode",
                       "--step-fn", "shapes_main.py:helper",  # a path, relative to the cwd
                       job=[sys.executable, "-m", "shapes_main", "--tokens", "5"], cwd=JOBS)
    why = ("the window never opened: the job ran 5 steps (step_fn steps); the window starts "
           "at step 100 (--skip 100)")
    assert res.returncode == NO_WINDOW_EXIT, res.stderr[-3000:]
    assert f"profplug: {why}" in res.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["no_window"] == why
    assert [(t["patched"], t["calls"], t["where"]) for t in run["step_fns"]] == [
        (True, 5, "script"), (True, 5, "script")]
    assert run["step_fns"][1]["name"] == f"{JOBS / 'shapes_main.py'}:helper"
    report = " ".join(res.stdout.split())  # the job's line, then the report's headline
    assert report.startswith("sum 31.378740 The window never opened: the job ran 5 steps "
                             "(step_fn steps); the window starts at step 100 (--skip 100).")
    assert "No GPU work" not in res.stdout


@pytest.mark.slow
def test_a_step_fn_never_called_gives_no_step(tmp_path) -> None:
    out = tmp_path / "o"
    res = profplug_run(out, "--no-report", "--step-fn", "__main__:never_called",
                       job=[sys.executable, str(JOBS / "shapes_main.py"), "--tokens", "3"])
    assert res.returncode == NO_WINDOW_EXIT, res.stderr[-3000:]
    why = ("the window never opened: no step: no profplug.step, no Megatron/transformers step, "
           "--step-fn "
           "__main__:never_called: never called; and no profplug p2p or synchronize call to "
           "record the whole run from")
    assert f"profplug: {why}" in res.stderr
    assert json.loads((out / "run.json").read_text())["no_window"] == why
