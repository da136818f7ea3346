"""The observer effect of a profiled run (run.json's ``observer``): traced against untraced
step medians, the warning over 20%, the line in the report's table and page, a window that
never opened as the report's headline, and ``whatif --unprofiled auto``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers import analyze
from profplug.analyzers.commands.whatif import unprofiled_step_us
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.render.registry import PAGE, render_text
from profplug.analyzers.steps.observer import observer_from_ranks
from synth import KinetoTrace, write_run

from profplug.cli.main import main


def _timing(us: list[float]) -> dict:
    return {"clock": "host", "step_us": us}


# rank 0: traced [100, 110, 120, 105, 1000]: 1000 is an outlier (over 5 scaled MADs of 14.8
# from the median 110), so the median over the rest is 107.5; untraced 80, 82 before (fewer
# than 5: not a baseline alone) and 90, 88, 86, 84 after: median 87. Rank 1: 50 traced, 40
# untraced. The run's figures are the slowest rank's: 107.5 vs 87, +23.6%.
RANKS = [
    {"rank": 0, "timing": _timing([100, 110, 120, 105, 1000]),
     "untraced": {"before": _timing([80, 82]), "after": _timing([90, 88, 86, 84])}},
    {"rank": 1, "timing": _timing([50, 50, 50]),
     "untraced": {"before": None, "after": _timing([40])}},
]
# rank 0 has the larger untraced median, from the steps after its window
LINE = "traced steps: median 107.5 us; untraced (after the window): 87.0 us (+23.6%)"
WARNING = ("the traced steps are 24% slower than the untraced ones (over 20%): the per-step "
           "figures describe a slower job than the real one")


def test_observer_is_the_slowest_ranks_medians() -> None:
    obs = observer_from_ranks(RANKS)
    assert obs is not None
    assert (obs["traced_us"], obs["untraced_us"], obs["overhead_pct"], obs["rank"]) == (
        107.5, 87.0, 23.6, 0)
    assert obs["statistic"] == "median" and obs["line"] == LINE and obs["warning"] == WARNING
    assert obs["untraced_from"] == "after"
    assert [(r["rank"], r["traced_us"], r["untraced_us"], r["untraced_steps_before"],
             r["untraced_steps_after"]) for r in obs["ranks"]] == [
        (0, 107.5, 87.0, 2, 4), (1, 50.0, 40.0, 0, 1)]
    assert (obs["ranks"][0]["untraced_from"], obs["ranks"][0]["untraced_before_us"],
            obs["ranks"][0]["untraced_after_us"]) == ("after", 81.0, 87.0)


def test_steps_before_the_window_are_the_baseline_when_there_are_enough() -> None:
    # given the H200 decode loop's series (hidden 1024, 2026-12-01): ~410 us before the
    # window, 670 traced, and after it a ramp to ~1,050 us while Kineto exported its trace
    # in the job's process
    before = [464.0, 413.0, 411.1, 439.7, 399.4, 425.2, 396.6, 454.5, 393.0]
    after = [576.3, 624.0, 558.9, 577.5, 670.3, 949.3, 1029.0, 977.1, 973.2, 929.3, 1005.5,
             992.8, 1076.2, 1072.5, 1051.8, 1007.9, 1085.2, 1086.0, 1092.4, 1059.5]
    obs = observer_from_ranks([{"rank": 0, "timing": _timing([670.0] * 30),
                                "untraced": {"before": _timing(before),
                                             "after": _timing(after)}}])
    # then the figure is the median of the steps before the window, not of the pooled ones
    assert obs is not None and obs["ranks"][0]["untraced_from"] == "before"
    assert obs["untraced_us"] == 413.0 and obs["overhead_pct"] == 62.2
    assert obs["untraced_from"] == "before"
    assert obs["line"] == "traced steps: median 670.0 us; untraced: 413.0 us (+62.2%)"


def test_no_warning_at_or_under_20_percent_and_none_without_untraced_steps() -> None:
    obs = observer_from_ranks([{"rank": 0, "timing": _timing([120]),
                                "untraced": {"after": _timing([100])}}])
    assert obs is not None and obs["overhead_pct"] == 20.0 and obs["warning"] is None
    assert observer_from_ranks([{"rank": 0, "timing": _timing([120]), "untraced": None}]) is None


def _run_dir(tmp_path: Path, meta: dict) -> Path:
    """A profplug run directory: a CPU-only Kineto trace (no GPU work) and run.json."""
    d = tmp_path / "run"
    (d / "kineto").mkdir(parents=True)
    t = KinetoTrace(rank=0)
    t.annotation("profplug.step", 0, 10)
    t.write(d / "kineto" / "rank0.json")
    (d / "run.json").write_text(json.dumps(meta))
    return d


def test_a_window_that_never_opened_is_the_headline_not_no_gpu_work(tmp_path: Path) -> None:
    why = ("the window never opened: the job ran 20 steps (manual steps); the window starts "
           "at step 100 (--skip 100)")
    rep = analyze(_run_dir(tmp_path, {"no_window": why}), run=[])
    assert rep.headline() == ("The window never opened: the job ran 20 steps (manual steps); "
                              "the window starts at step 100 (--skip 100).")
    assert "No GPU work" not in render_text(rep, "table")


def test_the_table_and_page_show_the_observer_line_and_warn(tmp_path: Path) -> None:
    rep = analyze(_run_dir(tmp_path, {"observer": observer_from_ranks(RANKS)}), run=[])
    assert WARNING in rep.warnings
    table = render_text(rep, "table")
    assert f"observer effect: {LINE}\n" in table
    assert f"observer effect: {LINE}" in render_text(rep, PAGE)


def test_unprofiled_auto_takes_the_untraced_median(tmp_path: Path) -> None:
    d = _run_dir(tmp_path, {"observer": observer_from_ranks(RANKS)})
    assert unprofiled_step_us("auto", d) == 87.0
    assert unprofiled_step_us("35", d) == 35.0 and unprofiled_step_us(None, d) is None
    with pytest.raises(ProfplugError, match="'auto'"):
        unprofiled_step_us("fast", d)
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(ProfplugError, match="no untraced step time"):
        unprofiled_step_us("auto", bare)


def test_whatif_unprofiled_auto_calibrates_on_run_json(tmp_path: Path, capsys) -> None:
    """The what-if's recorded step is the untraced median of run.json."""
    d = write_run(tmp_path, "device")
    obs = observer_from_ranks([{"rank": 0, "timing": _timing([150.0]),
                                "untraced": {"after": _timing([90.0, 92.0, 94.0])}}])
    (d / "run.json").write_text(json.dumps({"observer": obs}))
    assert main(["whatif", str(d), "--unprofiled", "auto", "--format", "json"]) == 0
    out = capsys.readouterr()
    assert [r["recorded_us"] for r in json.loads(out.out)["whatif"]["ranks"]] == [92.0, 92.0]
    assert "--unprofiled auto: the untraced median step of run.json, 92.0 us" in out.err
    assert main(["whatif", str(tmp_path / "device" / "rank0.json"), "--unprofiled",
                 "auto"]) == 0  # run.json beside the file
    capsys.readouterr()
    (d / "run.json").unlink()
    assert main(["whatif", str(d), "--unprofiled", "auto"]) == 2
    assert "no untraced step time" in capsys.readouterr().err
