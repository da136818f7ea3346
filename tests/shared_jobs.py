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
