"""``profplug run``'s exit status when nothing was profiled: short ``python -c`` jobs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from profplug.cli.main import main
from profplug.session.outcome import NO_WINDOW_EXIT, nsys_views


def _python_without_profplug() -> str:
    """The virtual environment's base interpreter: no profplug there (skip if it has one)."""
    base = getattr(sys, "_base_executable", "")
    if not base or sys.prefix == sys.base_prefix:
        pytest.skip("not in a virtual environment: no python without profplug at hand")
    if subprocess.run([base, "-I", "-c", "import profplug"], capture_output=True).returncode == 0:
        pytest.skip(f"{base} has profplug")
    return base


def test_a_job_whose_profplug_start_up_fails_exits_7_naming_the_error(
        tmp_path, capsys, monkeypatch) -> None:
    python = _python_without_profplug()
    monkeypatch.chdir(tmp_path)  # not the checkout, whose profplug ``-c`` would import
    code = main(["run", "-o", str(tmp_path / "o"), "--", python, "-c", "pass"])
    err = capsys.readouterr().err.splitlines()
    assert code == NO_WINDOW_EXIT
    (line,) = [x for x in err if "nothing was profiled" in x]
    assert f"start-up failed in {python} (is profplug installed for it?)" in line
    assert line.endswith("ModuleNotFoundError: No module named 'profplug'")


def test_a_job_that_never_imports_torch_exits_7_with_one_line(tmp_path, capsys) -> None:
    code = main(["run", "-o", str(tmp_path / "o"), "--", sys.executable, "-c", "pass"])
    err = capsys.readouterr().err.splitlines()
    assert code == NO_WINDOW_EXIT
    assert err == ["profplug: nothing was profiled: no trace was written: no process of the "
                   "job imported torch (profplug's session starts at the job's import torch)"]


def test_without_report_nothing_profiled_still_exits_7(tmp_path, capsys) -> None:
    code = main(["run", "-o", str(tmp_path / "o"), "--no-report", "--",
                 sys.executable, "-c", "pass"])
    assert code == NO_WINDOW_EXIT and "nothing was profiled" in capsys.readouterr().err


def test_trace_none_asks_for_no_trace_and_keeps_the_jobs_status(tmp_path, capsys) -> None:
    code = main(["run", "-o", str(tmp_path / "o"), "--trace", "none", "--",
                 sys.executable, "-c", "pass"])
    assert code == 0 and "nothing was profiled" not in capsys.readouterr().err


def test_a_failed_job_keeps_its_own_status_when_nothing_was_profiled(tmp_path, capsys) -> None:
    code = main(["run", "-o", str(tmp_path / "o"), "--", sys.executable, "-c",
                 "raise SystemExit(3)"])
    assert code == 3 and "nothing was profiled" not in capsys.readouterr().err


def test_an_nsys_capture_says_how_to_open_every_rank_and_the_merged_trace(tmp_path) -> None:
    out = tmp_path / "run dir"
    assert nsys_views(out) == []  # nsys wrote no report: nothing to open
    (out / "nsys").mkdir(parents=True)
    (out / "nsys" / "report.nsys-rep").write_bytes(b"")
    views = nsys_views(out)
    assert views[0].startswith(f"every rank in one Nsight Systems window: nsys-ui '{out}/nsys/")
    # the merged trace goes beside DIR, where `profplug report DIR` would not read it back
    assert f"--trace-out '{tmp_path}/run dir-merged.json.gz'" in views[1]
