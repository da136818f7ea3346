"""The checks made on synthetic inputs: ``check_sums`` (the sum rule every report keeps),
``analyze_traces`` (the report of some traces, its sum rule checked) and ``one_error`` (a
command's stderr is one error line), ``api_is_top`` (which host calls no other call of
their thread encloses)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from synth.kineto import KinetoTrace

if TYPE_CHECKING:
    from profplug.analyzers.core.timeline import Timeline
    from profplug.analyzers.report.analysis import Report


def check_sums(rep: Report) -> None:
    """The invariants every report must satisfy."""
    import pytest

    for r in rep.ranks:
        for d in r.devices:
            g = d.gpu
            assert sum(d.idle_by_cause_us.values()) == pytest.approx(g.idle_us, abs=1e-6)
            assert g.busy_us + g.idle_us == pytest.approx(g.window_us, abs=1e-6)
            assert g.compute_us + g.comm_us == pytest.approx(g.busy_us, abs=1e-6)


def one_error(capsys: Any) -> str:
    """The command's stderr, which must be one ``profplug: error:`` line."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("profplug: error: "), err
    return err[0]


def analyze_traces(tmp: Path, *traces: KinetoTrace, tol_us: float = 2.0) -> Report:
    """The report of ``traces`` (written to ``tmp/trace<i>.json``), its sum rule checked."""
    from profplug.analyzers.report.analysis import analyze
    from profplug.analyzers.stalls.rank import StallOptions

    paths = [t.write(tmp / f"trace{i}.json") for i, t in enumerate(traces)]
    rep = analyze(paths, StallOptions(tolerance_ns=round(tol_us * 1000)), jobs=1)
    check_sums(rep)
    return rep


def api_is_top(tl: Timeline) -> np.ndarray:
    """Per API call of ``tl``, True when no other call of its thread encloses it."""
    return tl.api_tops() == np.arange(tl.api_start_ns.size)
