"""``profplug run --trace nsys`` on the CPU, under a fake ``nsys`` (tests/runtime/fake_nsys.py)
that sends its ``--kill`` signal when the capture range ends, as nsys does."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from profplug.session.launch import nsys_command

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
JOB = [TORCHRUN, "--nproc-per-node", "2", str(HERE / "jobs" / "stepfn_job.py")]


@pytest.fixture
def nsys(tmp_path: Path) -> Path:
    """An executable ``nsys`` running the fake (``-S``: a stdlib-only tool, like the real
    binary it must not activate profplug itself)."""
    exe = tmp_path / "bin" / "nsys"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "
                   f"{shlex.quote(str(HERE / 'fake_nsys.py'))} \"$@\"\n")
    exe.chmod(0o755)
    return exe


def fake_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "FAKE_NSYS_LOG": str(tmp_path / "nsys.log"),
            "FAKE_NSYS_CAPTURE_END": str(tmp_path / "capture-ended")}


def nsys_log(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "nsys.log").read_text().splitlines()]


def profplug_run(out: Path, nsys: Path, *args: str, env: dict[str, str],
                 job: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profplug", "run", "-o", str(out),
                           "--trace", "nsys", "--nsys", str(nsys), "--no-report", *args,
                           "--", *job], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def test_nsys_is_asked_not_to_signal_the_job() -> None:
    argv = nsys_command("nsys", Path("/o"), ["torchrun", "x.py"])
    assert argv == ["nsys", "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw", "none",
                    "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                    "--kill", "none", "-o", "/o/nsys/report", "--force-overwrite", "true",
                    "torchrun", "x.py"]


def test_fake_nsys_checks_its_switches(nsys: Path, tmp_path: Path) -> None:
    bad = subprocess.run([str(nsys), "profile", "--kill", "sometimes", "true"],
                         capture_output=True, text=True, env=fake_env(tmp_path))
    assert bad.returncode == 1 and "bad value" in bad.stderr


@pytest.mark.slow
def test_nsys_run_with_steps_ends_the_capture_without_killing_the_job(nsys: Path,
                                                                      tmp_path: Path) -> None:
    out = tmp_path / "o"
    job = [*JOB, "--tokens", "10", "--capture-end-at", "5"]
    res = profplug_run(out, nsys, "--skip", "2", "--steps", "3",
                       "--step-fn", "stepmod:Decoder.decode", env=fake_env(tmp_path), job=job)
    assert res.returncode == 0, res.stderr[-3000:]
    log = nsys_log(tmp_path)
    assert log[0]["argv"] == nsys_command(str(nsys), out, job)[1:]
    assert {"event": "capture-end", "kill": "none"} in log
    assert not [e for e in log if e.get("event") == "signal"]
    run = json.loads((out / "run.json").read_text())
    assert run["exit_status"] == 0 and run["signals"] == []
    assert [(r["rank"], r["status"]) for r in run["ranks"]] == [(0, "finished"), (1, "finished")]
    assert all((r["window"]["mode"], r["window"]["steps"]) == ("steps", 3) for r in run["ranks"])
    assert (out / "nsys" / "report.nsys-rep").is_file()
    # and it says how to see every rank in one Nsight Systems window, and the annotated view
    assert f"profplug: every rank in one Nsight Systems window: nsys-ui {out}/nsys/" \
        "report.nsys-rep" in res.stderr
    assert f"profplug report {out} --trace-out {tmp_path}/o-merged.json.gz" in res.stderr


@pytest.mark.slow
def test_nsys_run_without_steps_keeps_the_jobs_status(nsys: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    # one process (the 2-rank jobs under the fake nsys are the other two tests)
    res = profplug_run(out, nsys, env=fake_env(tmp_path),
                       job=[sys.executable, str(HERE / "jobs" / "stepfn_job.py"), "--tokens", "4"])
    assert res.returncode == 7, res.stderr[-3000:]  # the window never opened (docs/run.md)
    assert "the window never opened" in res.stderr
    run = json.loads((out / "run.json").read_text())
    assert [(r["rank"], r["status"]) for r in run["ranks"]] == [(0, "finished")]
    assert all(r["window"]["steps"] == 0 for r in run["ranks"])
    one = profplug_run(tmp_path / "one", nsys, env=fake_env(tmp_path),
                       job=[sys.executable, "-c", "import sys, torch; sys.exit(3)"])
    assert one.returncode == 3
    (rank,) = json.loads((tmp_path / "one" / "run.json").read_text())["ranks"]
    assert (rank["status"], rank["exit_code"]) == ("exit", 3)


OLD_ARGV = """
import sys
from pathlib import Path
from profplug.session import launch

def without_kill_none(nsys, out, command):
    argv = fixed(nsys, out, command)
    i = argv.index("--kill")
    return argv[:i] + argv[i + 2:]

fixed, launch.nsys_command = launch.nsys_command, without_kill_none
sys.exit(launch.run(launch.RunOptions(
    out=Path(sys.argv[1]), nsys=sys.argv[2], command=sys.argv[3:], trace="nsys", skip=2,
    steps=3, report=False, step_fns=["stepmod:Decoder.decode"])))
"""


@pytest.mark.slow
def test_the_fake_reproduces_the_sigterm_and_every_rank_still_writes_its_status(
        nsys: Path, tmp_path: Path) -> None:
    """The argv before the fix (no --kill): the fake SIGTERMs the job's process group when
    the capture ends, as nsys did on the H200s; the job fails, but each rank's status says
    what happened."""
    out = tmp_path / "o"
    res = subprocess.run([sys.executable, "-c", OLD_ARGV, str(out), str(nsys), *JOB,
                          "--tokens", "10", "--capture-end-at", "5"], capture_output=True,
                         text=True, cwd=ROOT, env=fake_env(tmp_path), timeout=300)
    log = nsys_log(tmp_path)
    assert "--kill" not in log[0]["argv"]
    assert {"event": "signal", "signal": 15} in log
    assert res.returncode != 0 and "got signal: 15" in res.stderr  # torchrun's traceback
    run = json.loads((out / "run.json").read_text())
    assert [(r["rank"], r["status"], r["signal"]) for r in run["ranks"]] == [
        (0, "signal", 15), (1, "signal", 15)]
    assert all(r["window"]["steps"] == 3 for r in run["ranks"])


def test_nsys_progress_bars_leave_one_line_each_in_a_log(nsys: Path, tmp_path: Path) -> None:
    # capture_output: profplug's stdout/stderr are pipes, as when written to a log
    res = profplug_run(tmp_path / "o", nsys, env=fake_env(tmp_path),
                       job=[sys.executable, "-c", "print('job says hi')"])
    assert "\r" not in res.stdout and "\r" not in res.stderr
    assert res.stdout.splitlines().count("Processing 1234 events: [==========] 100%") == 1
    assert "Processing" not in res.stdout.replace(
        "Processing 1234 events: [==========] 100%", "")
    assert res.stderr.splitlines().count("Exporting 1234 events: [==========] 100%") == 1
    assert "job says hi" in res.stdout.splitlines()
    assert res.returncode == 7 and "no process of the job imported torch" in res.stderr
