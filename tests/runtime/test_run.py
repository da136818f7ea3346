"""``profplug run`` end to end on the CPU: torchrun + gloo + examples/infer.py."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from profplug.analyzers.core import ranges

from profplug.cli.main import main
from profplug.session.bootstrap import is_launcher

ROOT = Path(__file__).resolve().parents[2]
INFER = str(ROOT / "examples" / "infer.py")
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
SMALL = ["--hidden", "64", "--layers", "2", "--batch", "2", "--vocab", "97"]


def profplug(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "profplug", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=240, **kw)


def torchrun(n: int, *args: str) -> list[str]:
    return [TORCHRUN, "--nproc-per-node", str(n), INFER, *SMALL, *args]


def load_trace(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def token_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("tokens[")]


@pytest.fixture(scope="module")
def plain_tokens() -> list[str]:
    """The example's tokens over 12 steps without profplug (one process, no torchrun: tokens
    do not depend on the world size), shared by the tests that compare against them."""
    plain = subprocess.run([sys.executable, INFER, *SMALL, "--steps", "12"],
                           capture_output=True, text=True, check=True)
    return token_lines(plain.stdout)


@pytest.mark.slow
def test_run_end_to_end_two_ranks(tmp_path, plain_tokens) -> None:
    out = tmp_path / "run"
    res = profplug("run", "-o", str(out), "--skip", "3", "--steps", "4", "--",
                   *torchrun(2, "--steps", "12"))
    assert res.returncode == 0, res.stderr[-3000:]
    traces = sorted((out / "kineto").glob("rank*.json.gz"))
    assert [p.name for p in traces] == ["rank0.json.gz", "rank1.json.gz"]
    firsts = []
    for rank, path in enumerate(traces):
        trace = load_trace(path)
        window = trace["profplugWindow"]
        assert trace["distributedInfo"]["rank"] == rank and window["rank"] == rank
        assert window["aligned"] and window["steps"] == 4
        firsts.append(window["first_step"])
        names = [ranges.without_payload(e["name"]) for e in trace["traceEvents"]
                 if e.get("cat") == "user_annotation"]
        assert names.count(ranges.STEP) == 4
        assert ranges.SEND in names and ranges.RECV in names and ranges.SYNC_DEVICE in names
        assert not [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"
                    and str(e.get("name", "")).startswith("aten::")]  # USER_SCOPE only
    assert firsts == [3, 3]  # the window opens on the same step on both ranks
    run = json.loads((out / "run.json").read_text())
    assert run["exit_status"] == 0 and run["command"][0] == TORCHRUN
    assert [r["rank"] for r in run["ranks"]] == [0, 1]
    assert all(r["status"] == "finished" for r in run["ranks"])
    assert run["versions"]["torch"] and run["versions"]["profplug"]
    assert run["env"]["PROFPLUG_SKIP"] == "3"
    assert (out / "report.html").exists()
    assert "rank" in res.stdout  # the stall report was printed
    # --sync keep left the outputs as without profplug (tokens do not depend on world size)
    assert token_lines(res.stdout) == plain_tokens != []


@pytest.mark.slow
def test_event_policy_gives_the_same_tokens(tmp_path, plain_tokens) -> None:
    res = profplug("run", "-o", str(tmp_path / "ev"), "--sync", "event", "--no-report",
                   "--skip", "1", "--steps", "2", "--", *torchrun(2, "--steps", "12"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "sync=event" in res.stdout
    assert token_lines(res.stdout) == plain_tokens != []
    names = [e["name"] for e in load_trace(tmp_path / "ev" / "kineto" / "rank0.json.gz")
             ["traceEvents"] if e.get("cat") == "user_annotation"]
    assert ranges.SYNC_EVENT in names and ranges.SYNC_DEVICE not in names


@pytest.mark.slow
def test_failing_worker_leaves_its_trace_and_fails_the_run(tmp_path) -> None:
    out = tmp_path / "fail"
    res = profplug("run", "-o", str(out), "--no-report", "--skip", "1", "--steps", "50", "--",
                   *torchrun(2, "--steps", "30", "--fail-at", "5", "--fail-rank", "1"))
    assert res.returncode != 0
    trace = load_trace(out / "kineto" / "rank1.json.gz")
    assert trace["profplugWindow"]["first_step"] == 1
    names = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    assert names.count(ranges.STEP) >= 4
    status = json.loads((out / "status" / "rank1.json").read_text())
    assert status["status"] == "exception" and "injected failure" in status["exception"]
    assert status["exit_code"] == 1
    assert ("profplug: rank 1: exception: RuntimeError: injected failure at step 5 on rank 1"
            in res.stderr.splitlines())
    run = json.loads((out / "run.json").read_text())
    assert run["exit_status"] == res.returncode


@pytest.mark.slow
def test_sigterm_mid_run_leaves_readable_traces(tmp_path) -> None:
    out = tmp_path / "term"
    cmd = [sys.executable, "-m", "profplug", "run", "-o", str(out), "--no-report",
           "--skip", "2", "--steps", "100000", "--",
           *torchrun(2, "--steps", "100000", "--log-every", "10")]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        deadline = time.time() + 120
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("infer: step 20") or time.time() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc != 0
    for rank in (0, 1):
        trace = load_trace(out / "kineto" / f"rank{rank}.json.gz")
        names = [ranges.without_payload(e["name"]) for e in trace["traceEvents"]
                 if e.get("cat") == "user_annotation"]
        assert names.count(ranges.STEP) >= 10, rank
        assert trace["profplugWindow"]["first_step"] == 2
    statuses = [json.loads((out / "status" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert any(s["status"] == "signal" for s in statuses)


def test_missing_nsys_is_a_clear_error(tmp_path, capsys, monkeypatch) -> None:
    # in this process: refused before anything is launched
    code = main(["run", "-o", str(tmp_path / "n"), "--trace", "nsys",
                 "--nsys", str(tmp_path / "no-nsys"), "--", sys.executable, "-c", "pass"])
    assert code == 4 and "not an executable" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("PROFPLUG_NSYS", raising=False)
    code = main(["run", "-o", str(tmp_path / "n"), "--trace", "nsys", "--",
                 sys.executable, "-c", "pass"])
    assert code == 4 and "nsys (Nsight Systems) not found" in capsys.readouterr().err
    assert not (tmp_path / "n" / "run.json").exists()


def test_non_empty_or_unwritable_dir_refused_before_the_job(tmp_path, capsys) -> None:
    marker = tmp_path / "ran"
    job = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    # refused in this process, before anything is launched
    code = main(["run", "-o", str(tmp_path / "full"), "--", *job])
    assert code == 2 and "not empty" in capsys.readouterr().err and not marker.exists()
    (tmp_path / "file").write_text("")
    code = main(["run", "-o", str(tmp_path / "file" / "sub"), "--", *job])
    assert code == 2 and "cannot write" in capsys.readouterr().err and not marker.exists()
    # and with --force, the job runs
    res = profplug("run", "-o", str(tmp_path / "full"), "--force", "--trace", "none", "--", *job)
    assert res.returncode == 0 and marker.exists()
    assert (tmp_path / "full" / "x").read_text() == "keep"


def test_exit_status_and_existing_sitecustomize_are_kept(tmp_path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    code = ("import os, sys; print('chained', os.environ.get('USER_SITE_RAN'), "
            "os.environ.get('PROFPLUG_OWNER_PID') == str(os.getpid())); sys.exit(7)")
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = profplug("run", "-o", str(tmp_path / "o"), "--no-report", "--",
                   sys.executable, "-c", code, env=env)
    assert res.returncode == 7
    assert "chained 1 True" in res.stdout


@pytest.mark.parametrize(
    ("argv", "launcher"),
    [
        (["python", "/v/bin/torchrun", "--nproc-per-node", "2", "x.py"], True),
        (["python", "-u", "-m", "torch.distributed.run", "x.py"], True),
        (["python", "-X", "dev", "-m", "torch.distributed.launch", "x.py"], True),
        (["python", "-u", "examples/infer.py", "--steps", "3"], False),
        (["python", "-c", "import torch"], False),
        (["python", "-m", "mypkg.serve"], False),
    ],
)
def test_launcher_detection(argv: list[str], launcher: bool) -> None:
    assert is_launcher(argv) is launcher
