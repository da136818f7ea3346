"""A job that several tests read, run once per test session (``shared_job``)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest


def shared_job(factory: pytest.TempPathFactory, name: str,
               run: Callable[[Path], None]) -> Path:
    """``run(folder)`` once per test session, however many pytest-xdist workers ask: the
    first to ask runs it under a file lock, the others wait and read its folder. Jobs that
    several tests read (a torchrun job under ``profplug run``) cost one run."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = factory.getbasetemp()
    root = base.parent / f"shared-{uid}" if uid else base / "shared"
    root.mkdir(parents=True, exist_ok=True)
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").exists():
            folder.mkdir(exist_ok=True)
            run(folder)
            (folder / ".done").write_text("")
    return folder


def megatron_start_up(factory: pytest.TempPathFactory) -> tuple[list[list[str]], Path]:
    """``runtime/jobs/megatron_start_up.py`` run once per session: its printed lines, split,
    and the PROFPLUG_OUT folder it ran with."""
    import subprocess
    import sys

    from profplug.session.launch import SITECUSTOMIZE_DIR

    job = Path(__file__).resolve().parent / "runtime" / "jobs" / "megatron_start_up.py"

    def run(folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROFPLUG_")}
        env.update(PYTHONPATH=str(SITECUSTOMIZE_DIR), PROFPLUG_OUT=str(folder / "out"))
        res = subprocess.run([sys.executable, str(job)], capture_output=True, text=True,
                             env=env, cwd=job.parents[3], timeout=180)
        (folder / "rc").write_text(str(res.returncode))
        (folder / "stdout").write_text(res.stdout)
        (folder / "stderr").write_text(res.stderr)

    folder = shared_job(factory, "megatron_start_up", run)
    assert (folder / "rc").read_text() == "0", (folder / "stderr").read_text()[-2000:]
    return [line.split() for line in (folder / "stdout").read_text().splitlines()], folder / "out"
