"""Every way to start the CLI has every command: ``profplug`` (the console script's
``profplug.cli.main:main``), ``python -m profplug`` and ``python -m profplug.cli.main`` (where
``cli/main.py`` runs as ``__main__``, a second copy of the module)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from profplug.cli.main import main


@pytest.mark.parametrize("module", ["profplug", "profplug.cli.main"])
def test_python_m_runs_every_command(module: str) -> None:
    res = subprocess.run([sys.executable, "-m", module, "report", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Per-rank GPU idle time by cause" in res.stdout


def test_the_entry_function_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("ab", "ab-report", "compare", "report", "run", "whatif"):
        assert f"\n  {command} " in out
