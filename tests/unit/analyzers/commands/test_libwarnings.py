"""No library warning in user output: a warning inside a command becomes one line of ours
(or nothing, when known harmless); the real AlexNet trace (HTA's) prints no numpy warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.commands.libwarnings import own_warnings

from profplug.cli.main import main

ALEXNET = Path(__file__).resolve().parents[3] / "data/public_traces/hta/critical_path/alexnet"


def test_a_library_warning_becomes_our_line(capfd: pytest.CaptureFixture[str]) -> None:
    @own_warnings
    def cast() -> int:
        np.array([np.nan]).astype(np.int64)  # numpy: invalid value encountered in cast
        for _ in range(2):  # one place, twice: one line
            warnings.warn("twice", UserWarning, stacklevel=1)
        return 7

    assert cast() == 7
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("profplug: warning: ") for line in err)
    assert err[0].startswith("profplug: warning: RuntimeWarning in test_libwarnings.py:")
    assert err[0].endswith(": invalid value encountered in cast")
    assert err[1].endswith(": twice")


def test_alexnet_report_has_no_library_warning(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(ALEXNET), "--whatif"]) == 0
    out = capfd.readouterr()
    assert "RuntimeWarning" not in out.err + out.out
    assert "encountered in" not in out.err + out.out
