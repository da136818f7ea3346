"""A page (``--html``) of a big run: the run-level analyses where the ranks are read, the
swimlane's rows made there too (``crossrank.lanes``), and of each rank's idle gaps only the
longest that the page can draw (``gaps.longest``). The page is the one made in one process,
and the client holds no timeline and no more gaps per device than the page draws."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.commands import report
from profplug.analyzers.commands.report import run_report
from profplug.analyzers.crossrank import lanes
from profplug.analyzers.crossrank.lanes import LaneRow
from profplug.analyzers.crossrank.result import CrossRankResult
from profplug.analyzers.render import timeline_data
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale import placement
from profplug.analyzers.stalls.gaps import Gaps, longest
from reference import Spy, blank, one_process, page
from synth.pipeline import PipelineSpec, write


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    files, _ = write(PipelineSpec(stages=4, tp=2, steps=24, slow_stage=2),
                     tmp_path_factory.mktemp("p8"))
    return files


def _gaps(n: int, seed: int) -> tuple[Gaps, np.ndarray]:
    rng = np.random.default_rng(seed)
    start = np.cumsum(rng.integers(1, 50, n))
    dur = rng.integers(1, 12, n)  # many ties: the earlier row goes first
    return Gaps(start, start + dur, rng.integers(0, 3, n), rng.integers(0, 4, n).astype(np.int8),
                rng.integers(-1, 9, n)), dur


def test_longest_keeps_each_devices_longest_gaps_in_their_order() -> None:
    g, dur = _gaps(600, 7)
    out = longest(g, 40)
    for d in range(3):
        rows = np.nonzero(g.device == d)[0]
        want = np.sort(rows[np.argsort(-dur[rows], kind="stable")[:40]])
        here = out.device == d
        for col in ("start_ns", "end_ns", "cause", "call"):
            assert getattr(out, col)[here].tolist() == getattr(g, col)[want].tolist()
        gone = np.setdiff1d(rows, want)
        assert out.left[d] == (gone.size, int(dur[gone].sum()))
    # thinning again counts what the first left out too; a device under the cap is whole
    twice = longest(out, 10)
    assert twice.left == longest(g, 10).left
    assert longest(g, 600) is g


@pytest.mark.parametrize("max_gaps", [3, 10, 40])
def test_a_pages_timeline_from_each_rows_longest_gaps_is_the_one_from_all(
        run: list[Path], max_gaps: int) -> None:
    rep = analyze(run, jobs=1, progress=False)
    thin = replace(rep, ranks=[replace(r, gaps=longest(r.gaps, max_gaps + 1))
                               for r in rep.ranks])
    full_data, full_notes = timeline_data.timeline_data([("", rep)], max_gaps)
    thin_data, thin_notes = timeline_data.timeline_data([("", thin)], max_gaps)
    assert sum(r.gaps.start_ns.size for r in thin.ranks) < \
        sum(r.gaps.start_ns.size for r in rep.ranks)
    assert full_notes and thin_notes == full_notes  # "drew the N longest of M gaps ..."
    assert thin_data == full_data


def test_a_page_of_a_big_run_holds_no_timeline_and_is_the_page_made_in_one_process(
        run: list[Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # given a run over the size from which the what-if runs where the ranks are read, and a
    # page that draws at most 12 gaps per row (so that the workers keep 13 per device)
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    monkeypatch.setattr(timeline_data, "MAX_GAPS_PER_ROW", 12)
    monkeypatch.setattr(timeline_data, "MIN_GAPS_PER_ROW", 4)
    monkeypatch.setattr(report, "GAPS_KEPT", 13)
    here = one_process(run, report_analyses(None), monkeypatch)
    spy = Spy(monkeypatch)
    assert run_report(run, html=tmp_path / "p.html", fmt="json", output=tmp_path / "r.json",
                      quiet=True, jobs=2) == 0
    # then the page is the one made in one process
    assert blank((tmp_path / "p.html").read_text()) == page(here)
    assert here.run["cross_rank"].swimlane is not None
    # and no timeline reached the client, nor more than 13 gaps per device of any rank
    assert spy.first and spy.second
    assert all(not r.timelines for r in spy.first + spy.second)
    stalls = [s for r in spy.first for s in r.stalls]
    assert len(stalls) == 8 and all(s.gaps.left for s in stalls)
    assert max(int(np.unique(s.gaps.device, return_counts=True)[1].max())
               for s in stalls) == 13
    # the second round sent each rank's swimlane row, and no stall analysis
    rows = [v.value.value[1] for r in spy.second for v in r.values
            if v.name == CrossRankResult.key]
    assert len(rows) == 8 and all(isinstance(x, LaneRow) for x in rows)
    assert not any(r.stalls for r in spy.second)


@pytest.mark.parametrize("max_ops", [1, 150, 300, 40_000])
def test_the_swimlane_made_of_rows_from_the_workers_is_the_one_made_in_one_process(
        run: list[Path], monkeypatch: pytest.MonkeyPatch, max_ops: int) -> None:
    # given a page budget that draws 3 steps, fewer, or one step anyway
    monkeypatch.setattr(lanes, "MAX_OPS", max_ops)
    analyses = report_analyses(False)
    here = one_process(run, analyses, monkeypatch).run["cross_rank"].swimlane
    there = analyze(run, run=analyses, jobs=2, progress=False).run["cross_rank"].swimlane
    assert here is not None and there is not None
    assert there.to_dict() == here.to_dict()
    assert len(here.steps) == {1: 1, 150: 2}.get(max_ops, 3)
    assert bool(here.notes) == (max_ops == 1)
