"""The cross-rank analysis where the ranks are read (``scale/run_level.py``): the report of
8 synthetic ranks is the one made in one process, no timeline reaches the client, the default
what-if still says why it did not run (or runs, the timelines read after all), and a part
lost with its worker leaves one warning line."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.graph.model import DropSpec
from profplug.analyzers.report import registry
from profplug.analyzers.report.analysis import Report, analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale import placement, run_level
from profplug.analyzers.scale.dispatch import FileResult
from profplug.analyzers.whatif import rounds
from profplug.analyzers.whatif.result import WhatIfResult
from reference import Spy, one_process
from synth.pipeline import PipelineSpec, write

TIMES = re.compile(r'"(replay_s|analysis_s)": [0-9.eE+-]+')


def report_json(rep: Report) -> str:
    return TIMES.sub(r'"\1": 0', json.dumps(rep.to_dict(), sort_keys=True))


@pytest.fixture(scope="module")
def run8(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    files, _ = write(PipelineSpec(stages=4, tp=2, steps=4, slow_stage=2),
                     tmp_path_factory.mktemp("p8"))
    return files


def test_the_parts_on_the_workers_give_the_report_made_in_one_process(
        run8: list[Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    run = report_analyses(False)  # --no-whatif: the cross-rank analysis alone
    here = one_process(run8, run, monkeypatch)
    spy = Spy(monkeypatch)
    # when the report needs no page (no swimlane): the parts run where the ranks are read
    there = analyze(run8, run=run, jobs=2, progress=False, keep_gaps=False)
    # then the report is the same, and its critical path crosses ranks
    assert "cross_rank" in there.run
    assert report_json(there) == report_json(here)
    assert len(there.run["cross_rank"].critical_path.by_rank) > 1
    # and no timeline reached the client: every rank came back as its facts, then its part
    assert spy.first and spy.second
    assert all(not r.timelines for r in spy.first + spy.second)
    assert sorted(v.rank for r in spy.first for v in r.values) == list(range(8))
    assert sorted(v.rank for r in spy.second for v in r.values) == list(range(8))
    # the second round loaded each file from the report's scratch cache, removed after
    assert all(r.cached for r in spy.second)
    assert not any(p.name.startswith("profplug-scratch-") for p in tmp_path.iterdir())


@pytest.mark.parametrize("whatif", [None, True], ids=["default", "forced"])
def test_the_whatif_on_the_workers_gives_the_report_made_in_one_process(
        run8: list[Path], monkeypatch: pytest.MonkeyPatch, whatif: bool | None) -> None:
    # given a run over the size from which the what-if runs where the ranks are read
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    run = report_analyses(whatif)
    here = one_process(run8, run, monkeypatch)
    spy = Spy(monkeypatch)
    there = analyze(run8, run=run, jobs=2, progress=False, keep_gaps=False)
    # then both analyses ran, the JSON is the one made in one process, and no timeline
    # reached the client: the ranks' reduced graphs, then their results
    assert "whatif" in there.run and "cross_rank" in there.run
    assert there.run["whatif"].ranks[0].saving_us > 0
    assert report_json(there) == report_json(here)
    assert all(not r.timelines for r in spy.first + spy.second)
    assert all(v.value.value.parts[WhatIfResult.key].value.rec.n
               for r in spy.first for v in r.values)
    assert sorted(v.value.value.rank for r in spy.second for v in r.values
                  if v.name == WhatIfResult.key) == list(range(8))


def test_a_drop_at_on_the_workers_is_resolved_over_every_rank_then_replayed_there(
        run8: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # given a what-if that drops the syncs at one call site, named by a part of its name
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    run = report_analyses(True, drop=DropSpec(callsite="recv_from"))
    here = one_process(run8, run, monkeypatch)
    spy = Spy(monkeypatch)
    there = analyze(run8, run=run, jobs=2, progress=False, keep_gaps=False)
    # then the report is the one made in one process, with that call site resolved
    assert report_json(there) == report_json(here)
    assert there.run["whatif"].callsite.endswith("recv_from_prev_pipeline_rank_")
    assert all(r.dropped_calls for r in there.run["whatif"].ranks)
    # the first round counted each rank's sync call sites and made no reduction; the
    # reductions came in a round of their own, then the parts; no timeline travelled
    first = [v.value.value.parts[WhatIfResult.key].value for r in spy.first for v in r.values]
    assert all(isinstance(f, Counter) and f for f in first) and len(first) == 8
    assert all(not r.timelines for r in spy.first + spy.second)
    assert len(spy.second) == 2 * len(run8)


def _cycle(*a: object, **k: object) -> None:
    raise ProfplugError(rounds.CYCLE)


def test_a_whatif_with_a_cycle_within_its_size_reads_the_timelines_after_all(
        run8: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    run = report_analyses(None)
    here = one_process(run8, run, monkeypatch)
    monkeypatch.setattr(rounds, "plan", _cycle)  # the ranks' joined graph has a cycle
    spy = Spy(monkeypatch)
    there = analyze(run8, run=run, jobs=1, progress=False, keep_gaps=False)
    # then the what-if ran in one process, on timelines read again, with no second round
    assert "whatif" in there.run and "cross_rank" in there.run
    assert any(r.timelines for r in spy.first) and not spy.second
    assert report_json(there) == report_json(here)


def test_a_whatif_with_a_cycle_over_its_size_says_why(
        run8: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    monkeypatch.setattr(registry, "WHATIF_AUTO_MAX_EVENTS", 100)
    monkeypatch.setattr(rounds, "plan", _cycle)
    spy = Spy(monkeypatch)
    there = analyze(run8, run=report_analyses(None), jobs=1, progress=False, keep_gaps=False)
    # then the cross-rank analysis stands, made on the workers, and one line says why the
    # what-if did not run
    assert "cross_rank" in there.run and "whatif" not in there.run
    assert all(not r.timelines for r in spy.first + spy.second)
    assert [w for w in there.warnings if "what-if" in w] == [rounds.CYCLE]


def test_a_part_lost_with_its_worker_leaves_one_warning(
        run8: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    real = run_level.gather

    def lose_rank3(tasks: list, backend: object) -> list[FileResult]:
        out = real(tasks, backend)
        return [FileResult(r.path, 0, lost=f"{r.path}: the worker died twice")
                if r.path.endswith("rank3.json") else r for r in out]

    monkeypatch.setattr(run_level, "gather", lose_rank3)
    rep = analyze(run8, run=report_analyses(False), jobs=1, progress=False, keep_gaps=False)
    # then the report stands without the cross-rank analysis, and says why in one line
    assert "cross_rank" not in rep.run and len(rep.ranks) == 8
    lines = [w for w in rep.warnings if "cross-rank analysis not run" in w]
    assert len(lines) == 1 and "ranks [3]" in lines[0] and "died twice" in lines[0]


@pytest.mark.parametrize("spec", [PipelineSpec(stages=4, tp=2, steps=2),
                                  PipelineSpec(stages=3, tp=3, coll_seq=False, steps=2),
                                  PipelineSpec(stages=3, peer_in_name=False, steps=2)],
                         ids=["tp2", "tp3-no-seq", "bare"])
def test_every_ranks_rule_in_one_pass_is_each_ranks_own(spec: PipelineSpec,
                                                        tmp_path: Path) -> None:
    from profplug.analyzers.crossrank.per_rank import rank_rules
    from profplug.analyzers.graph.matching import match
    from profplug.analyzers.scale.load import load_timelines

    paths, _ = write(spec, tmp_path)
    m = match(load_timelines(paths, jobs=1, progress=False))
    assert m.e_pos.size
    assert rank_rules(m) == [m.rank_rule(p) for p in range(len(m.ranks))]


def test_a_trace_gone_before_the_second_round_leaves_one_warning(
        run8: list[Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    # given a copy of the run, one of whose files goes between the two rounds
    for f in run8:
        shutil.copy(f, tmp_path / f.name)
    real = run_level.gather

    def gone(tasks: list, backend: object, **kw: object) -> list[FileResult]:
        (tmp_path / "rank6.json").unlink()
        return real(tasks, backend, **kw)

    monkeypatch.setattr(run_level, "gather", gone)
    rep = analyze([tmp_path], run=report_analyses(False), jobs=1, progress=False,
                  keep_gaps=False)
    # then the report of the 8 ranks read stands, without the cross-rank analysis, and one
    # line says why
    assert "cross_rank" not in rep.run and len(rep.ranks) == 8
    assert [w for w in rep.warnings if "cross-rank" in w] == [
        f"cross-rank analysis not run: {tmp_path / 'rank6.json'}: no such file"]
