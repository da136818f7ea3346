"""``profplug ab`` end to end on the CPU: gloo ranks under torchrun (host step timing, since
there is no CUDA), the example, a planted policy-dependent result, a failed round, jobs that
never import profplug (Megatron-Core auto steps, ``--step-fn``), usage errors, Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from profplug.analyzers.ab import schedule

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs"
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
INFER = [str(ROOT / "examples" / "infer.py"), "--hidden", "64", "--layers", "2", "--batch",
         "2", "--vocab", "97"]


def ab(out: Path, *args: str, job: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "profplug", "ab", "-o", str(out), *args,
                           "--", *job], capture_output=True, text=True, cwd=ROOT, timeout=400)


def torchrun(*args: str) -> list[str]:
    return [TORCHRUN, "--nproc-per-node", "2", *args]


def load(out: Path) -> dict:
    return json.loads((out / "ab.json").read_text())


@pytest.mark.slow
def test_ab_on_the_example_runs_every_policy_every_round_in_the_recorded_order(tmp_path) -> None:
    out, html = tmp_path / "ab", tmp_path / "ab.html"
    res = ab(out, "--policies", "device,event,none", "--rounds", "2", "--skip", "2",
             "--steps", "4", "--order", "random", "--seed", "3", "--html", str(html),
             job=torchrun(*INFER, "--steps", "8"))
    assert res.returncode == 0, res.stderr[-3000:]
    doc = load(out)
    plan = schedule(["device", "event", "none"], 2, "random", seed=3)
    assert [(r["round"], r["policy"]) for r in doc["runs"]] == plan
    assert (doc["order"], doc["seed"], doc["version"]) == ("random", 3, 1)
    for k, run in enumerate(doc["runs"]):
        assert (run["index"], run["status"], run["exit_status"]) == (k, "ok", 0)
        run_json = json.loads((Path(run["dir"]) / "run.json").read_text())
        assert run_json["env"]["PROFPLUG_SYNC"] == run["policy"]
        assert run_json["env"]["PROFPLUG_TRACE"] == "none"
        assert run_json["env"]["PROFPLUG_AB_ROUND"] == str(run["round"])
        assert [k["rank"] for k in run["ranks"]] == [0, 1]
        for rank in run["ranks"]:
            assert rank["clock"] == "host" and len(rank["step_us"]) == 4
            assert rank["step_us"] == rank["host_step_us"] and rank["first_step"] == 2
            assert rank["digest"] and len(rank["step_digests"]) == 8  # 0..7, 2..5 timed
            assert [d is None for d in rank["step_digests"]] == [False, False, *[True] * 4,
                                                                 False, False]
    assert doc["outputs_identical"] is True and doc["clock"] == "host"
    for p in ("event", "none"):
        s = doc["summary"][p]
        assert s["rounds_ok"] == 2 and s["speedup_vs_device"] > 0 and s["paired"]
        assert doc["verdicts"][p].startswith(f"{p}: ")
    assert "outputs: identical in all 6 successful runs" in res.stdout
    assert html.read_text().count('id="ab-plot-') == 4
    assert "profplug ab: run 6/6: ok, median" in res.stderr
    # 2 rounds: no CI, no verdict claimed
    assert all(doc["summary"][p]["speedup_ci95"] is None for p in ("event", "none"))
    assert "too few rounds for a confidence interval (2; at least 3)" in doc["verdict"]
    # analyzed again from ab.json, nothing run: the same ab.json
    again = subprocess.run([sys.executable, "-m", "profplug", "ab-report", str(out), "--html",
                            str(html)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert load(out) == doc and "(nothing was run)" in again.stderr


@pytest.mark.slow
def test_a_planted_policy_dependent_result_fails_loudly(tmp_path) -> None:
    """Planted in a warm-up step (before the timed window, where digests are taken)."""
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "1", "--skip", "3", "--steps", "4",
             job=torchrun(str(JOBS / "ab_job.py"), "--steps", "8", "--plant-policy", "event",
                          "--plant-step", "1", "--plant-rank", "1"))
    assert res.returncode == 1, res.stderr[-3000:]
    assert ("profplug ab: OUTPUTS DIFFER: run 1 (round 0, event) differs from run 0 (round 0, "
            "device) first at step 1 on rank 1") in res.stderr
    doc = load(out)
    assert doc["outputs_identical"] is False and doc["exit_status"] == 1
    (m,) = doc["outputs"]["mismatches"]
    assert (m["run"], m["step"], m["rank"], m["policy"]) == (1, 1, 1, "event")
    assert doc["verdict"].startswith("OUTPUTS DIFFER")


@pytest.mark.slow
def test_a_result_planted_after_the_window_is_caught_too(tmp_path) -> None:
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "1", "--skip", "1", "--steps", "3",
             job=[sys.executable, str(JOBS / "ab_job.py"), "--steps", "7", "--plant-policy",
                  "event", "--plant-step", "5", "--plant-rank", "0"])
    assert res.returncode == 1, res.stderr[-3000:]
    (m,) = load(out)["outputs"]["mismatches"]
    assert (m["run"], m["step"], m["rank"], m["policy"]) == (1, 5, 0, "event")


@pytest.mark.slow
def test_a_failed_round_is_recorded_the_rest_kept_and_the_exit_status_says_so(tmp_path) -> None:
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "3", "--skip", "1", "--steps", "3",
             job=[sys.executable, str(JOBS / "ab_job.py"), "--steps", "6", "--fail-round", "1",
                  "--fail-policy", "event"])
    assert res.returncode == 5, res.stderr[-3000:]
    doc = load(out)
    assert [r["status"] for r in doc["runs"]] == ["ok", "ok", "ok", "failed", "ok", "ok"]
    failed = doc["runs"][3]
    assert failed["exit_status"] == 1 and (failed["round"], failed["policy"]) == (1, "event")
    assert any("planted failure in round 1" in why for why in failed["reasons"])
    assert doc["summary"]["event"]["rounds_ok"] == 2
    assert doc["summary"]["event"]["round_medians_us"][1] is None
    assert doc["outputs_identical"] is True and doc["exit_status"] == 5
    assert "failed: run 3 (round 1, event)" in res.stdout
    assert "profplug ab: 1 of 6 runs failed (exit status 5)" in res.stderr


@pytest.mark.slow
def test_a_megatron_job_that_never_imports_profplug(tmp_path) -> None:
    """Steps from Megatron-Core's run_one_forward_step, outputs from its
    broadcast_from_last_pipeline_stage: nothing in the job mentions profplug."""
    source = (JOBS / "mcore_decode.py").read_text()
    assert not re.search(r"^\s*(import|from) profplug", source, re.M)
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "1", "--skip", "2", "--steps", "4",
             job=torchrun(str(JOBS / "mcore_decode.py"), "--tokens", "8"))
    assert res.returncode == 0, res.stderr[-3000:]
    doc = load(out)
    for run in doc["runs"]:
        for rank in run["ranks"]:
            assert rank["step_source"] == "megatron" and len(rank["step_us"]) == 4
            # steps 0, 1 (warm-up) and 6, 7 (after the window); 2..5 are timed
            assert rank["digest_calls"] == 4 and rank["digest_in_window"] == 4
    assert doc["outputs_identical"] is True


@pytest.mark.slow
def test_a_step_fn_job_is_timed_and_its_outputs_are_not_checked(tmp_path) -> None:
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "1", "--skip", "2", "--steps", "4",
             "--step-fn", "stepmod:Decoder.decode",
             job=torchrun(str(JOBS / "stepfn_job.py"), "--tokens", "8"))
    assert res.returncode == 0, res.stderr[-3000:]
    doc = load(out)
    assert all(k["step_source"] == "step_fn" and len(k["step_us"]) == 4
               for r in doc["runs"] for k in r["ranks"])
    assert doc["outputs_identical"] is None
    assert "outputs: not checked (nothing was digested" in res.stdout


@pytest.mark.parametrize("args, message", [
    (["--policies", "event,none"], "--policies: name 'device'"),
    (["--order", "sorted"], "--order must be one of interleaved, random"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--whatif", "/nonexistent/run"], "/nonexistent/run: no such file or directory"),
])
def test_usage_errors_stop_before_any_run(tmp_path, capsys, args, message) -> None:
    # in this process: nothing is launched when the options are wrong
    marker = tmp_path / "ran"
    code = main(["ab", "-o", str(tmp_path / "ab"), *args, "--", sys.executable, "-c",
                 f"open({str(marker)!r}, 'w')"])
    assert code == 2 and message in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "ab").exists()


def test_a_non_empty_directory_needs_force(tmp_path, capsys) -> None:
    out = tmp_path / "ab"
    out.mkdir()
    (out / "keep").write_text("x")
    code = main(["ab", "-o", str(out), "--", sys.executable, "-c", "pass"])
    assert code == 2 and "not empty (use --force" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_stops_after_the_current_run_and_keeps_what_ran(tmp_path) -> None:
    out = tmp_path / "ab"
    cmd = [sys.executable, "-m", "profplug", "ab", "-o", str(out), "--rounds", "3",
           "--skip", "1", "--steps", "2", "--", sys.executable, str(JOBS / "ab_job.py"),
           "--steps", "100000000"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = out / "runs" / "00-device-r0"  # made when the first run launches
        deadline = time.time() + 60
        while not first.exists() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-3000:]
    doc = load(out)
    assert doc["interrupted"] is True and len(doc["runs"]) == 1
    assert "interrupted after 1 of 6 runs" in stderr
