"""``profplug ab`` end to end on the CPU: gloo ranks under torchrun (host step timing, since
there is no CUDA), a one-process job, a planted policy-dependent result, a failed round, jobs that
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


def ab(out: Path, *args: str, job: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "profplug", "ab", "-o", str(out), *args,
                           "--", *job], capture_output=True, text=True, cwd=ROOT, timeout=400)


def torchrun(*args: str) -> list[str]:
    return [TORCHRUN, "--nproc-per-node", "2", *args]


def load(out: Path) -> dict:
    return json.loads((out / "ab.json").read_text())


@pytest.mark.slow
def test_ab_runs_every_policy_every_round_in_the_recorded_order(tmp_path, capsys) -> None:
    """One process per run (the 2-rank ab runs under torchrun are the Megatron, planted-result
    and never-reached tests below; 6 torchrun runs here cost 18 torch imports)."""
    out, html = tmp_path / "ab", tmp_path / "ab.html"
    res = ab(out, "--policies", "device,event,none", "--rounds", "2", "--skip", "2",
             "--steps", "4", "--order", "random", "--seed", "3", "--html", str(html),
             "--switch-every", "0",
             job=[sys.executable, str(JOBS / "ab_job.py"), "--steps", "8"])
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
        assert [k["rank"] for k in run["ranks"]] == [0]
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
    # analyzed again from ab.json (in this process), nothing run: the same ab.json
    code = main(["ab-report", str(out), "--html", str(html)])
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    assert load(out) == doc and "(nothing was run)" in err


@pytest.mark.slow
def test_a_planted_policy_dependent_result_fails_loudly(tmp_path) -> None:
    """Planted in a warm-up step (before the timed window, where digests are taken). Two
    policies: the planted one and the device run it is compared with."""
    out = tmp_path / "ab"
    res = ab(out, "--policies", "device,event", "--rounds", "1", "--skip", "3", "--steps", "4",
             "--switch-every", "0",
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
    res = ab(out, "--rounds", "1", "--skip", "1", "--steps", "3", "--switch-every", "0",
             job=[sys.executable, str(JOBS / "ab_job.py"), "--steps", "7", "--plant-policy",
                  "event", "--plant-step", "5", "--plant-rank", "0"])
    assert res.returncode == 1, res.stderr[-3000:]
    (m,) = load(out)["outputs"]["mismatches"]
    assert (m["run"], m["step"], m["rank"], m["policy"]) == (1, 5, 0, "event")


@pytest.mark.slow
def test_a_failed_round_is_recorded_the_rest_kept_and_the_exit_status_says_so(tmp_path) -> None:
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "2", "--skip", "1", "--steps", "3", "--switch-every", "0",
             job=[sys.executable, str(JOBS / "ab_job.py"), "--steps", "6", "--fail-round", "1",
                  "--fail-policy", "event"])
    assert res.returncode == 5, res.stderr[-3000:]
    doc = load(out)
    # counterbalanced: round 1 runs event first; the run after the failed one still runs
    assert [r["status"] for r in doc["runs"]] == ["ok", "ok", "failed", "ok"]
    assert [r["position"] for r in doc["runs"]] == [0, 1, 0, 1]
    failed = doc["runs"][2]
    assert failed["exit_status"] == 1 and (failed["round"], failed["policy"]) == (1, "event")
    assert any("planted failure in round 1" in why for why in failed["reasons"])
    assert doc["summary"]["event"]["rounds_ok"] == 1
    assert doc["summary"]["event"]["round_medians_us"][1] is None
    assert doc["summary"]["event"]["round_medians_us"][0] is not None
    assert doc["outputs_identical"] is True and doc["exit_status"] == 5
    assert "failed: run 2 (round 1, event)" in res.stdout
    assert "profplug ab: 1 of 4 runs failed (exit status 5)" in res.stderr


@pytest.mark.slow
def test_a_megatron_job_that_never_imports_profplug(tmp_path) -> None:
    """Steps from Megatron-Core's run_one_forward_step, outputs from its
    broadcast_from_last_pipeline_stage: nothing in the job mentions profplug. One switched
    run (device, then event, every 3 steps: both policies in one job, 3 Megatron processes
    instead of 6), a ``profplug run --trace none`` run: the patches and both policies reach
    Megatron's functions on both gloo ranks without a profiler."""
    source = (JOBS / "mcore_decode.py").read_text()
    assert not re.search(r"^\s*(import|from) profplug", source, re.M)
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "1", "--skip", "2", "--steps", "6", "--switch-every", "3",
             job=torchrun(str(JOBS / "mcore_decode.py"), "--tokens", "10", "--show-patches"))
    assert res.returncode == 0, res.stderr[-3000:]
    doc = load(out)
    (run,) = doc["runs"]
    assert doc["design"] == "switched" and run["block_order"] == ["device", "event"]
    assert [rank["rank"] for rank in run["ranks"]] == [0, 1]
    for rank in run["ranks"]:
        assert rank["step_source"] == "megatron" and len(rank["step_us"]) == 6
        # steps 0, 1 (warm-up) and 8, 9 (after the window); 2..7 are timed
        assert rank["digest_calls"] == 4 and rank["digest_in_window"] == 6
        # both policies reached Megatron's send/recv (patched) on every rank
        assert all(rank["policy_counts"][p]["p2p_calls"] > 0 for p in ("device", "event"))
    run_dir = Path(run["dir"])
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.json", "status"]
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["traces"] == [] and "missing_ranks" not in run_json
    assert [r["rank"] for r in run_json["ranks"]] == [0, 1]
    for r in run_json["ranks"]:
        w = r["window"]
        assert r["status"] == "finished" and r["trace"] is None
        assert (w["trace"], w["sync"], w["mode"], w["step_source"], w["steps"]) == (
            "none", "device", "steps", "megatron", 6)
    # ab patches Megatron's functions, not torch.cuda.synchronize (its ranges only matter to a
    # profiler, and ab runs none); the job prints its policy after the loop: the last block's
    patches = sorted(ln for ln in res.stdout.splitlines() if ln.startswith("patches"))
    assert patches == [f"patches rank={r} megatron=True synchronize=False sync=event"
                       for r in (0, 1)]
    assert doc["outputs_identical"] is True


@pytest.mark.slow
def test_a_job_the_policy_never_reaches_is_one_loud_line_exit_7_and_stops(tmp_path) -> None:
    """stepfn_job never calls profplug's p2p, Megatron's functions or current_policy(): it
    is timed, but no policy could have changed it; after the first round ab stops."""
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "3", "--skip", "2", "--steps", "4",
             "--step-fn", "stepmod:Decoder.decode",
             job=[sys.executable, str(JOBS / "stepfn_job.py"), "--tokens", "8"])
    assert res.returncode == 7, res.stderr[-3000:]
    loud = [ln for ln in res.stderr.splitlines() if "POLICY NOT REACHED" in ln]
    assert loud == ["profplug ab: POLICY NOT REACHED: run 0 (round 0, device): the device "
                    "policy reached nothing in the job: no sync site called (profplug.p2p, "
                    "Megatron-Core's, transformers' or a --sync-site), no device sync or event "
                    "wait issued, no profplug.current_policy() call (and 1 more) (exit status 7)"]
    assert "no policy reached the job in the first round" in res.stderr
    doc = load(out)
    assert len(doc["runs"]) == 2 and doc["exit_status"] == 7 and len(doc["not_reached"]) == 2
    assert doc["stopped"].startswith("no policy reached the job in the first round")
    assert all(k["step_source"] == "step_fn" and len(k["step_us"]) == 4
               and k["policy_counts"]["device"] == k["policy_counts"]["event"] == {
                   "p2p_calls": 0, "device_syncs": 0, "event_waits": 0,
                   "current_policy_calls": 0}
               for r in doc["runs"] for k in r["ranks"])
    assert doc["outputs_identical"] is None
    assert "outputs: not checked (nothing was digested" in res.stdout


def test_a_first_round_that_failed_the_same_way_stops_ab(tmp_path) -> None:
    missing = tmp_path / "no_such_script.py"
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "4", "--switch-every", "0", job=[sys.executable, str(missing)])
    assert res.returncode == 6, res.stderr[-3000:]
    doc = load(out)
    assert len(doc["runs"]) == 2 and doc["stopped"].startswith(
        "every run of the first round failed the same way (exit status 2 before any rank "
        "reported")
    assert "not running the other 6 runs" in res.stderr


POLICY_JOB = [sys.executable, str(JOBS / "policy_job.py")]


@pytest.mark.slow
def test_an_aa_check_with_a_planted_position_effect_resolves_no_difference(tmp_path) -> None:
    """device against itself, the first run of every round 30% slower: the default
    (counterbalanced) order claims no difference and reports the position effect."""
    out = tmp_path / "ab"
    res = ab(out, "--aa", "--switch-every", "0", "--rounds", "3", "--skip", "2",
             "--steps", "10", job=[*POLICY_JOB, "--steps", "12", "--base-ms", "20",
                                   "--first-slow", "1.3"])  # 20 ms: a loaded machine's
    # scheduling delays (~1 ms) stay small against the planted 30%
    assert res.returncode == 0, res.stderr[-3000:]
    doc = load(out)
    assert doc["policies"] == ["device", "device2"] and doc["order"] == "counterbalanced"
    assert [(r["policy"], r["position"]) for r in doc["runs"][:4]] == [
        ("device", 0), ("device2", 1), ("device2", 0), ("device", 1)]
    assert doc["summary"]["device2"]["resolved"] is False
    pe = doc["position_effect"]
    lo, hi = pe["ci95_pct"]
    # a busy machine's wake-up delays add the same time to every step and shrink a
    # sleep-based effect by a point or two (seen under `pytest -n 3`: CI 28.5-30.0%)
    assert pe["resolved"] is True and lo - 2.0 <= 30.0 <= hi + 2.0, pe
    assert "first run of a round: +" in res.stdout


@pytest.mark.slow
def test_switching_inside_runs_resolves_a_10_percent_difference(tmp_path) -> None:
    """event takes exactly 0.9x the device step (through current_policy()); every run draws
    its host speed in 0.6-1.4x, which separate runs cannot see past (the same draws through
    the analysis: tests/unit/analyzers/ab/test_ab_aa_sim.py)."""
    # seed 82: the 3 processes' host speeds differ widely (0.6-1.4x draws)
    # 20 ms steps: a busy machine's wake-up delays (the suite runs on every core) add the same
    # absolute time to both policies' steps and pull the ratio toward 1; at 10 ms a run under
    # `pytest -n auto` measured a CI of 1.0386-1.1111 (truth 1.11111)
    job = [*POLICY_JOB, "--steps", "80", "--base-ms", "20", "--event-factor", "0.9",
           "--host-seed", "82"]
    res = ab(tmp_path / "sw", "--switch-every", "10", "--rounds", "3", "--skip", "10",
             "--steps", "60", job=job)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = load(tmp_path / "sw")
    ev = doc["summary"]["event"]
    lo, hi = ev["speedup_ci95"]
    assert doc["design"] == "switched" and ev["speedup_rounds"] == 3
    # the CI excludes 1.0 and is narrow; its width grows with the machine's load (other
    # tests' processes on the same cores): bounded at 0.12. It holds the truth (1/0.9) up
    # to 1% of it: a 95% CI misses the truth in 1 run of 20 by design, and a loaded machine
    # once put its lower end at 1.1112
    truth = 1 / 0.9
    assert 1.0 < lo <= truth * 1.01 and hi >= truth * 0.99 and hi - lo <= 0.12, ev
    assert [r["block_order"] for r in doc["runs"]] == [["device", "event"],
                                                       ["event", "device"],
                                                       ["device", "event"]]
    assert doc["outputs_identical"] is True and "switched every 10 steps" in doc["verdict"]


@pytest.mark.parametrize("args, message", [
    (["--policies", "event,none"], "--policies: name 'device'"),
    (["--order", "sorted"], "--order must be one of counterbalanced, random, interleaved"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--switch-every", "2"], "--switch-every must be 0 (separate runs) or more than 2"),
    (["--switch-every", "60"], "--switch-every 60 needs --steps >= 120"),
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
           "--steps", "100000000", "--pause-ms", "10"]
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


@pytest.mark.slow
def test_a_job_that_reads_the_policy_once_falls_back_to_separate_runs(tmp_path) -> None:
    """The first (switched) run shows that only the starting policy reached the job: ab
    says so and runs separate runs instead, keeping that run in probe_run.json."""
    out = tmp_path / "ab"
    res = ab(out, "--rounds", "1", "--skip", "2", "--steps", "40",
             job=[*POLICY_JOB, "--steps", "44", "--base-ms", "2", "--ask-once"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "the job follows only the policy it starts with" in res.stderr
    doc = load(out)
    assert doc["design"] == "separate" and [r["policy"] for r in doc["runs"]] == [
        "device", "event"]
    probe = json.loads((out / "probe_run.json").read_text())
    assert probe["block_order"] == ["device", "event"]
    assert probe["ranks"][0]["policy_counts"]["event"]["current_policy_calls"] == 0
