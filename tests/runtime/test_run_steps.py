"""``profplug run`` with steps the job never declares (``--step-fn``, Megatron-Core's
``run_one_forward_step``), ``--trace none``, and how failed ranks are reported. CPU: gloo
ranks under torchrun; the jobs in tests/runtime/jobs/ never import profplug."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from profplug.analyzers.core import ranges

from profplug.session.outcome import NO_WINDOW_EXIT

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs"
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def profplug_run(out: Path, *args: str, job: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "profplug", "run", "-o", str(out), *args,
                           "--", *job], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, **kw)


def torchrun(script: str, *args: str) -> list[str]:
    return [TORCHRUN, "--nproc-per-node", "2", str(JOBS / script), *args]


def step_ranges(path: Path) -> tuple[list[int], int]:
    """(numbers of the ProfilerStep#N ranges, number of profplug.step ranges) in a trace."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    numbers = [int(m.group(1)) for n in names if (m := re.fullmatch(r"ProfilerStep#(\d+)", n))]
    return numbers, names.count(ranges.STEP)


@pytest.mark.slow
def test_step_fn_in_an_imported_module_gives_the_step_window(tmp_path) -> None:
    """One process (--step-fn on 2 gloo ranks under torchrun: test_step_fn_shapes.py, the
    failed-rank test below and test_nsys_fake.py)."""
    out = tmp_path / "o"
    res = profplug_run(out, "--skip", "2", "--steps", "4", "--no-report",
                       "--step-fn", "stepmod:Decoder.decode", "--step-fn", "stepmod:never_called",
                       "--step-fn", "stepmod:nothere", "--step-fn", "nevermod:f",
                       job=[sys.executable, str(JOBS / "stepfn_job.py"), "--tokens", "10"])
    assert res.returncode == 0, res.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["env"]["PROFPLUG_STEP_FN"] == ("stepmod:Decoder.decode,stepmod:never_called,"
                                              "stepmod:nothere,nevermod:f")
    assert [r["rank"] for r in run["ranks"]] == [0]
    for r in run["ranks"]:
        w = r["window"]
        assert (w["mode"], w["step_source"], w["first_step"], w["steps"]) == (
            "steps", "step_fn", 2, 4)
        decode = next(t for t in r["step_fns"] if t["name"] == "stepmod:Decoder.decode")
        assert decode["patched"] and decode["calls"] == 10
        assert step_ranges(out / "kineto" / f"rank{r['rank']}.json.gz") == ([2, 3, 4, 5], 4)
    assert run["warnings"] == [
        "--step-fn stepmod:never_called: never called; no steps came from it",
        "--step-fn stepmod:nothere: stepmod has no attribute 'nothere'; no steps came from it",
        "--step-fn nevermod:f: module nevermod was never imported; no steps came from it",
    ]
    for w in run["warnings"]:
        assert f"profplug: warning: {w}" in res.stderr


def test_malformed_step_fn_is_refused_before_the_job(tmp_path) -> None:
    marker = tmp_path / "ran"
    res = profplug_run(tmp_path / "o", "--step-fn", "jobs/run:decode",
                       job=[sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    assert res.returncode == 2 and "--step-fn" in res.stderr and "jobs/run" in res.stderr
    assert not marker.exists()


@pytest.mark.slow
def test_megatron_run_one_forward_step_is_the_step(tmp_path) -> None:
    """The job calls the real GPTInferenceWrapper.run_one_forward_step per token and never
    profplug.step(): the window is aligned on those calls, with Megatron's recv/send in it."""
    out = tmp_path / "o"
    res = profplug_run(out, "--skip", "2", "--steps", "3", "--no-report",
                       job=torchrun("mcore_decode.py", "--tokens", "8"))
    assert res.returncode == 0, res.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    for r in run["ranks"]:
        w = r["window"]
        assert (w["mode"], w["step_source"], w["first_step"], w["steps"], w["aligned"]) == (
            "steps", "megatron", 2, 3, True)
        trace = out / "kineto" / f"rank{r['rank']}.json.gz"
        assert step_ranges(trace) == ([2, 3, 4], 3)
        with gzip.open(trace, "rt") as f:
            names = {ranges.without_payload(e["name"]) for e in json.load(f)["traceEvents"]}
        assert (ranges.SEND if r["rank"] == 0 else ranges.RECV) in names  # peer=R dropped
    lines = sorted(ln for ln in res.stdout.splitlines() if ln.startswith("rank "))
    assert len(lines) == 2 and lines[0].split("tokens")[1] == lines[1].split("tokens")[1]


@pytest.mark.slow
def test_trace_none_applies_the_policy_without_a_profiler(tmp_path) -> None:
    """One process (the Megatron patches and both policies under ``--trace none`` on 2 gloo
    ranks: test_ab.py's Megatron test, whose runs are all ``--trace none``)."""
    out = tmp_path / "o"
    res = profplug_run(out, "--trace", "none", "--sync", "event", "--skip", "1", "--steps", "4",
                       job=[sys.executable, str(JOBS / "ab_job.py"), "--steps", "6",
                            "--show-patches"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "patches rank=0 synchronize=True sync=event" in res.stdout.splitlines()
    assert sorted(p.name for p in out.iterdir()) == ["run.json", "status"]
    run = json.loads((out / "run.json").read_text())
    assert run["traces"] == [] and "missing_ranks" not in run
    (r,) = run["ranks"]
    w = r["window"]
    assert r["status"] == "finished" and r["trace"] is None
    assert (w["trace"], w["sync"], w["mode"], w["step_source"], w["first_step"], w["steps"]) == (
        "none", "event", "steps", "manual", 1, 4)
    assert w["wall_s"] > 0
    # the job asks profplug.current_policy() every step: all 6 asks were answered "event"
    counts = r["policy"]["counts"]
    assert r["policy"]["current"] == "event" and counts["event"]["current_policy_calls"] == 6
    assert counts["device"]["current_policy_calls"] == counts["none"]["current_policy_calls"] == 0
    assert "stall report" not in res.stdout and "no report" not in res.stderr


ARGPARSE_JOB = """
import argparse, torch
ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int)
ap.parse_args()
"""


def test_argparse_exit_is_recorded_and_printed(tmp_path) -> None:
    out = tmp_path / "o"
    res = profplug_run(out, "--no-report", job=[sys.executable, "-c", ARGPARSE_JOB, "--n", "x"])
    assert res.returncode == 2 and "invalid int value" in res.stderr
    (rank,) = json.loads((out / "run.json").read_text())["ranks"]
    assert (rank["status"], rank["exit_code"]) == ("exit", 2)
    assert res.stderr.rstrip().endswith("profplug: rank 0: exit: exit code 2")


def test_raised_system_exit_of_a_single_process_job(tmp_path) -> None:
    out = tmp_path / "o"
    res = profplug_run(out, "--no-report",
                       job=[sys.executable, "-c", "import torch\nraise SystemExit(3)"])
    assert res.returncode == 3
    (rank,) = json.loads((out / "run.json").read_text())["ranks"]
    assert (rank["status"], rank["exit_code"]) == ("exit", 3)
    assert "profplug: rank 0: exit: exit code 3" in res.stderr


def test_clean_exit_prints_no_failure(tmp_path) -> None:
    res = profplug_run(tmp_path / "o", "--no-report",
                       job=[sys.executable, "-c", "import sys, torch; sys.exit(0)"])
    # no step and nothing recorded: the window never opened (7), but no rank failed
    assert res.returncode == NO_WINDOW_EXIT and "profplug: rank" not in res.stderr
    (rank,) = json.loads((tmp_path / "o" / "run.json").read_text())["ranks"]
    assert (rank["status"], rank["exit_code"]) == ("finished", 0)


@pytest.mark.slow
def test_each_failed_rank_gets_a_line(tmp_path) -> None:
    out = tmp_path / "o"
    res = profplug_run(out, "--no-report", "--step-fn", "stepmod:Decoder.decode",
                       job=torchrun("stepfn_job.py", "--tokens", "3", "--exit", "5",
                                    "--exit-rank", "1"))
    assert res.returncode == 1  # torchrun's status for failed workers
    ranks = json.loads((out / "run.json").read_text())["ranks"]
    assert [(r["rank"], r["status"], r["exit_code"]) for r in ranks] == [
        (0, "signal", None), (1, "exit", 5)]  # torchrun stopped rank 0 with SIGTERM
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("profplug: rank")]
    assert lines == ["profplug: rank 0: signal: SIGTERM", "profplug: rank 1: exit: exit code 5"]


@pytest.mark.slow
def test_a_step_fn_only_rank_0_calls_opens_its_window_without_a_deadlock(tmp_path) -> None:
    """``--step-fn torch.distributed:send`` where rank 1 only receives.
    Rank 0's window barrier waits for rank 1 up to PROFPLUG_ALIGN_TIMEOUT_S, then opens
    without it, naming it; the job ends (a collective barrier hung until killed)."""
    import os

    out = tmp_path / "o"
    res = profplug_run(out, "--skip", "1", "--steps", "3", "--no-report",
                       "--step-fn", "torch.distributed:send",
                       job=[sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                            "2", str(JOBS / "send_job.py"), "--tokens", "6"],
                       env={**os.environ, "PROFPLUG_ALIGN_TIMEOUT_S": "2"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert "rank 1 sum 8.0" in res.stdout
    said = [ln for ln in res.stderr.splitlines() if "never reached" in ln]
    assert said and said[0].startswith("profplug: warning: rank 0: rank(s) [1] never reached")
    run = json.loads((out / "run.json").read_text())
    w0 = next(r["window"] for r in run["ranks"] if r["rank"] == 0)
    assert (w0["steps"], w0["aligned"], w0["align_missing"]) == (3, False, [1])
