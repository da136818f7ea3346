"""What a report is checked against: the same report made in one process (every timeline
read into it, then the run-level analyses), its JSON and its page with the timings blanked
(the one thing that differs between two makings of one report); and a spy on what reaches
the client in each round of a report in rounds."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from profplug.analyzers.render.registry import PAGE, render_text
from profplug.analyzers.report import analysis
from profplug.analyzers.scale import load, placement, run_level
from profplug.analyzers.scale.dispatch import FileResult

# what differs between two runs of the same analysis: how long it took
_TIMES = re.compile(r'("(?:replay_s|analysis_s)": ?)[0-9.eE+-]+|replayed in [0-9.,]+ s')


def one_process(paths: list[Path], run: Iterable[object], monkeypatch: pytest.MonkeyPatch,
                **kw: object) -> analysis.Report:
    """``analyze(paths, run=run, **kw)`` with no analysis run where the ranks are read."""
    with monkeypatch.context() as m:
        m.setattr(placement, "rounds_for", lambda *a, **k: [])
        return analysis.analyze(paths, run=run, jobs=1, progress=False, **kw)


def blank(text: str) -> str:
    """A JSON report or a page with its timings blanked."""
    return _TIMES.sub(lambda m: (m.group(1) or "replayed in ") + "0", text)


def report_json(rep: object) -> str:
    """The JSON of a report (keys sorted), its timings blanked."""
    return blank(json.dumps(rep.to_dict(), sort_keys=True))


def page(rep: object) -> str:
    """The HTML page of ``rep``, its timings blanked."""
    return blank(render_text(rep, PAGE))


class Spy:
    """Every result gathered, by round (the report's read, the cross-rank parts)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.first: list[FileResult] = []
        self.second: list[FileResult] = []
        real = load.gather

        def first(*a: object, **k: object) -> list[FileResult]:
            out = real(*a, **k)
            self.first += out
            return out

        def second(*a: object, **k: object) -> list[FileResult]:
            out = real(*a, **k)
            self.second += out
            return out

        monkeypatch.setattr(load, "gather", first)
        monkeypatch.setattr(run_level, "gather", second)
