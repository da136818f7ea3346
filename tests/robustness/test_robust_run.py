"""``profplug run`` under abuse: killed ranks, Ctrl-C on profplug, a full disk, hostile
arguments, and a job whose outputs and exceptions must not change. CPU only."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from profplug.analyzers.core.errors import ProfplugError

from profplug.cli.main import main
from profplug.session import launch

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = str(Path(sys.executable).parent / "torchrun")

# A job: seeded numbers through profplug.step(), then (optionally) a specific exception.
JOB = """
import os, sys, time
import torch, profplug
torch.manual_seed(0)
w = torch.randn(16, 16)
x = torch.randn(4, 16)
n = int(sys.argv[1])
try:
    for i in range(n):
        with profplug.step():
            x = torch.tanh(x @ w)
            torch.cuda.synchronize() if torch.cuda.is_available() else None
        # one write per line: under torchrun (python -u) print() writes the text and its
        # newline separately, and the two ranks' lines would interleave
        sys.stdout.write(f"step {i} rank {os.environ.get('RANK', '-')} pid {os.getpid()} "
                         f"sum {x.sum().item():.10f}\\n")
        sys.stdout.flush()
        if n > 1000:
            time.sleep(0.01)
except KeyboardInterrupt:
    sys.exit(130)
if len(sys.argv) > 2:
    raise ValueError(f"bad value {x.sum().item():.10f} after {n} steps")
"""


def profplug_run(out: Path, *job: str, opts: tuple[str, ...] = ("--no-report",),
                 **kw) -> subprocess.CompletedProcess[str]:
    kw.setdefault("cwd", ROOT)
    return subprocess.run([sys.executable, "-m", "profplug", "run", "-o", str(out), *opts,
                           "--skip", "1", "--steps", "2", "--", *job],
                          capture_output=True, text=True, timeout=180, **kw)


def no_pid(stdout: str) -> list[str]:
    return [re.sub(r" pid \d+", "", line) for line in stdout.splitlines()]


@pytest.fixture
def job(tmp_path: Path) -> str:
    p = tmp_path / "job.py"
    p.write_text(JOB)
    return str(p)


def test_sync_keep_leaves_outputs_and_exceptions_unchanged(tmp_path: Path, job: str) -> None:
    plain = subprocess.run([sys.executable, job, "6", "raise"], capture_output=True,
                           text=True, timeout=120)
    res = profplug_run(tmp_path / "o", sys.executable, job, "6", "raise",
                       opts=("--no-report", "--sync", "keep"))
    assert plain.returncode == res.returncode == 1
    assert no_pid(res.stdout) == no_pid(plain.stdout) != []
    exc = plain.stderr.strip().splitlines()[-1]
    assert exc.startswith("ValueError: bad value ") and exc.endswith(" after 6 steps")
    assert exc in res.stderr.splitlines()
    status = json.loads((tmp_path / "o" / "status" / "rank0.json").read_text())
    assert status["exception"] == exc and status["window"]["steps"] == 2


def test_command_is_an_argument_list_not_a_shell(tmp_path: Path) -> None:
    hostile = ["; touch pwned", "$(touch pwned2)", "`touch pwned3`", "a b|touch pwned4"]
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    res = profplug_run(tmp_path / "o", sys.executable, "-c", code, *hostile, cwd=tmp_path,
                       opts=("--trace", "none"))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == hostile
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]
    assert json.loads((tmp_path / "o" / "run.json").read_text())["command"][-4:] == hostile


def test_full_disk_is_refused_before_the_job(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "ran"
    usage = type("Usage", (), {"total": 1 << 30, "used": (1 << 30) - (5 << 20),
                               "free": 5 << 20})()
    monkeypatch.setattr(launch.shutil, "disk_usage", lambda p: usage)
    opts = launch.RunOptions(out=tmp_path / "o", report=False,
                             command=[sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    with pytest.raises(ProfplugError, match=r"o: only 5 MiB free on its file system"):
        launch.run(opts)
    assert not marker.exists() and not (tmp_path / "o" / "run.json").exists()


def tree(*dirs: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for d in dirs for p in d.rglob("*")}


def test_nothing_is_written_outside_dir(tmp_path: Path, job: str) -> None:
    cwd, home, tmp = (tmp_path / n for n in ("cwd", "home", "tmp"))
    for d in (cwd, home, tmp):
        d.mkdir()
    (home / "keep.txt").write_text("x")
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": "",
           "PROFPLUG_NSYS": ""}
    env.pop("XDG_CACHE_HOME")
    before = tree(cwd, home, tmp, tmp_path)
    out = tmp_path / "out"
    res = profplug_run(out, sys.executable, job, "5", opts=(), cwd=cwd, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    after = tree(cwd, home, tmp, tmp_path)
    changed = {p for p in after if before.get(p) != after[p]} | (set(before) - set(after))
    assert changed and all(p.startswith(str(out)) for p in changed), sorted(changed)
    assert sorted(p.name for p in out.iterdir()) == ["kineto", "report.html", "run.json",
                                                     "status"]


def read_until(proc: subprocess.Popen, prefix: str, n: int, limit_s: float = 90) -> list[str]:
    seen: list[str] = []
    deadline = time.time() + limit_s
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            seen.append(line)
        if len(seen) >= n or time.time() > deadline:
            break
    return seen


def _sigint_default() -> None:
    """In profplug's process before it starts: SIGINT as in a terminal. A suite started in
    the background (``cmd &``, some CI runners) ignores SIGINT, every process it starts
    inherits that, and the job would ignore the SIGINT profplug forwards (and run on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_to_profplug_stops_the_job_and_writes_run_json(tmp_path: Path,
                                                              job: str) -> None:
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "profplug", "run", "-o", str(out),
                             "--no-report", "--skip", "1", "--steps", "100000", "--",
                             sys.executable, job, "1000000"], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_sigint_default)
    try:
        assert len(read_until(proc, "step", 20)) == 20
        proc.send_signal(signal.SIGINT)  # to profplug only, not its process group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err
    run = json.loads((out / "run.json").read_text())
    assert run["exit_status"] == 130 and run["signals"] == ["SIGINT"]
    (status,) = run["ranks"]
    assert status["status"] == "signal" and status["signal"] == signal.SIGINT
    with gzip.open(out / "kineto" / "rank0.json.gz", "rt") as f:
        trace = json.load(f)
    assert trace["profplugWindow"]["steps"] >= 10  # what was collected was flushed


@pytest.mark.slow
def test_sigkill_loses_only_that_rank(tmp_path: Path, job: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "profplug", "run", "-o", str(out),
                             "--skip", "1", "--steps", "100000", "--", TORCHRUN,
                             "--nproc-per-node", "2", job, "1000000"], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pids: dict[int, int] = {}
    try:
        lines = read_until(proc, "step 20 ", 2)
        pids = {int(ln.split(" rank ")[1].split()[0]): int(ln.split(" pid ")[1].split()[0])
                for ln in lines}
        assert sorted(pids) == [0, 1], lines
        os.kill(pids[1], signal.SIGKILL)
        stdout, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            for pid in pids.values():  # torchrun starts each rank in a session of its own
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    assert proc.returncode != 0
    assert "profplug: warning: missing ranks: [1]" in err
    run = json.loads((out / "run.json").read_text())
    assert run["missing_ranks"] == [1] and [r["rank"] for r in run["ranks"]] == [0, 1]
    assert run["ranks"][0]["world_size"] == 2 and run["ranks"][0]["status"] == "signal"
    assert run["ranks"][1]["status"] == "lost"  # its start-up record, never replaced
    assert "profplug: rank 1: lost: no final status" in err
    assert (out / "kineto" / "rank0.json.gz").is_file()
    assert "profplug stall report · 1 rank(s)" in stdout  # rank 0 is still reported
    # reported again afterwards (in this process: the command line's own entry)
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "missing ranks: [1]" in capsys.readouterr().err
