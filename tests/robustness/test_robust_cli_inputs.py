"""Every bad input gives one line naming the file and a non-zero exit, never a traceback.

Each case runs ``main()`` in this process (an exception escaping it fails the test with its
traceback); a few also run as ``python -m profplug`` in a process of their own, to prove that
no traceback reaches the terminal there either.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from bad_inputs import CASES, Case, report_argv, run_case
from synth import KinetoTrace, one_error

from profplug.cli.main import main

# An error line, and a report then a --strict line, each in a real process.
IN_A_PROCESS = ["empty file", "truncated Kineto JSON, --strict"]


def check(res: subprocess.CompletedProcess[str], case: Case, tmp_path: Path) -> None:
    assert res.returncode == case.code, res.stderr
    assert "Traceback" not in res.stderr
    if case.code == 0:
        assert case.says in res.stdout
        return
    lines = res.stderr.strip().splitlines()
    if case.code == 1:  # --strict: the report, then one line
        assert case.says in lines[-1]
        return
    assert len(lines) == 1 and lines[0].startswith("profplug: error: "), res.stderr
    assert case.says in lines[0]
    assert str(tmp_path) in lines[0] or "rank 0" in lines[0]  # names the file(s)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> None:
    argv = report_argv(case, tmp_path)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    check(subprocess.CompletedProcess(argv, code, out, err), case, tmp_path)


@pytest.mark.parametrize("case", [c for c in CASES if c.name in IN_A_PROCESS],
                         ids=lambda c: c.name)
def test_bad_input_in_a_process_of_its_own(tmp_path: Path, case: Case) -> None:
    check(run_case(case, tmp_path), case, tmp_path)


def test_the_cases_run_in_a_process_exist() -> None:
    assert sorted(IN_A_PROCESS) == sorted(c.name for c in CASES if c.name in IN_A_PROCESS)


def test_out_of_memory_names_the_inputs(monkeypatch, capsys) -> None:

    def boom(**_: Any) -> None:
        raise MemoryError

    monkeypatch.setattr("profplug.cli.main._CLI", boom)
    assert main(["ab-report", "x"]) == 3
    assert "out of memory (the inputs need more" in capsys.readouterr().err


def test_absurdly_many_devices_are_one_line(tmp_path: Path, capsys) -> None:
    t = KinetoTrace(rank=0)
    for k in range(5000):
        t.gpu(10.0 * k, 5.0, device=k)
    p = t.write(tmp_path / "rank0.json")
    assert main(["report", str(p), "--jobs", "1"]) == 3
    assert "5,000 distinct GPU device ids on rank 0 (more than 4,096)" in one_error(capsys)
