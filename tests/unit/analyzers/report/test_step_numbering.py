"""One numbering for steps in the JSON: the trace's own step numbers (``ProfilerStep#N``'s
N), never an index into a series.

The trace: ``synth.planted_trace``'s steps, numbered from ``FIRST`` = 5, with the planted
long step at index ``LONG`` = 4, so its number is 9.
"""

from __future__ import annotations

import json
from pathlib import Path

from profplug.analyzers import analyze
from profplug.analyzers.render.registry import render_text
from synth import PLANTED_AT, PLANTED_PERIOD, PLANTED_STALL, planted_trace

FIRST = 5
P, LONG, STALL = PLANTED_PERIOD, PLANTED_AT, PLANTED_STALL


def numbered_trace(tmp: Path) -> Path:
    d = tmp / "numbered"
    d.mkdir()
    planted_trace(first=FIRST).write(d / "rank0.json")
    return d


def test_outlier_steps_in_the_json_are_the_traces_step_numbers(tmp_path: Path) -> None:
    rep = analyze(numbered_trace(tmp_path))
    steps = json.loads(render_text(rep, "json"))["ranks"][0]["steps"]
    assert steps["step_numbers"][0] == FIRST
    assert steps["outlier_steps"] == [FIRST + LONG]
    assert [o["step"] for o in steps["outliers"]] == steps["outlier_steps"]
    # the number names the step whose period is the planted one
    i = steps["step_numbers"].index(steps["outlier_steps"][0])
    assert steps["period_us_per_step"][i] == P + STALL


def test_the_internal_outlier_indices_stay_indices(tmp_path: Path) -> None:
    s = analyze(numbered_trace(tmp_path)).rank(0).steps
    assert s is not None and s.outlier_steps == [LONG] and s.number(LONG) == FIRST + LONG
