"""ab's run record: given a run whose launcher got SIGTERM while torchrun exited 1, when ab
collects it, then the record says interrupted (128 + SIGTERM), so ab stops after it (seen on
an H200: the job's own status 1 let ab go on with every later run)."""

from __future__ import annotations

import json
from pathlib import Path

from profplug.session.abrun import INTERRUPTED, collect


def _run_json(tmp_path: Path, signals: list[str]) -> Path:
    (tmp_path / "run.json").write_text(json.dumps({
        "signals": signals,
        "ranks": [{"rank": 0, "status": "signal", "timing": {}, "window": {}}]}))
    return tmp_path


def test_sigterm_forwarded_to_torchrun_reads_as_interrupted(tmp_path: Path) -> None:
    rec = collect(_run_json(tmp_path, ["SIGTERM"]), 1, 0, "event", 1, 14.0)
    assert rec["exit_status"] == 143 and rec["exit_status"] in INTERRUPTED
    assert rec["status"] == "failed"
    assert any("interrupted (SIGTERM" in r for r in rec["reasons"])


def test_no_signal_keeps_the_jobs_status(tmp_path: Path) -> None:
    rec = collect(_run_json(tmp_path, []), 1, 0, "event", 1, 14.0)
    assert rec["exit_status"] == 1
