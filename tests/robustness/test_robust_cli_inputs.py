"""Every bad input gives one line naming the file and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_inputs import CASES, Case, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(tmp_path: Path, case: Case) -> None:
    res = run_case(case, tmp_path)
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
