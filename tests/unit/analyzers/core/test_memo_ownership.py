"""What an analysis keeps of its timelines (the matching, launch calls, symbol kinds, policy
masks) belongs to the Memo its caller made: two analyses running at once in two threads each
see only their own entries and give the results each gives alone, and a second analysis
after the first computes everything again (synthetic pipelines of 4 and 2 stages)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers import analyze, cross_rank_analysis
from profplug.analyzers.core import timeline
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank.analysis import cross_rank
from profplug.analyzers.graph import matching
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import whatif, whatif_analysis
from synth.pipeline import PipelineSpec, write

RUNS = {"pp4": PipelineSpec(stages=4, steps=5, sync="device"),
        "pp2": PipelineSpec(stages=2, steps=7, layers=6, sync="device")}
TIMES = ("replay_s", "analysis_s")  # wall-clock seconds: the only figures that differ


def _figures(d: Any) -> Any:
    """A result's JSON without its wall-clock seconds."""
    if isinstance(d, dict):
        return {k: _figures(v) for k, v in d.items() if k not in TIMES}
    if isinstance(d, list):
        return [_figures(v) for v in d]
    return d


def _analyses(tls: list[Timeline], memo: Memo) -> tuple[Any, Any]:
    """The what-if and the cross-rank analysis of one run, sharing ``memo`` as a report's."""
    w = whatif(tls, memo=memo)
    x = cross_rank(tls, memo=memo)
    return _figures(w.to_dict()), _figures(x.to_dict())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Timeline]]:
    out = {}
    for name, spec in RUNS.items():
        d = tmp_path_factory.mktemp(name)
        write(spec, d)
        out[name] = load_timelines([d], jobs=1, progress=False)
    return out


def test_two_analyses_in_threads_give_their_results_alone(
        runs: dict[str, list[Timeline]]) -> None:
    # given each run's results analyzed alone
    alone = {name: _analyses(tls, Memo()) for name, tls in runs.items()}
    assert alone["pp4"] != alone["pp2"]
    # when both run at once, in two threads started together, three times over
    got: dict[str, list[tuple[Any, Any]]] = {name: [] for name in runs}
    memos: dict[str, list[Memo]] = {name: [] for name in runs}
    start = threading.Barrier(len(runs))
    failed: list[BaseException] = []

    def one(name: str) -> None:
        try:
            for _ in range(3):
                start.wait()
                memo = Memo()
                memos[name].append(memo)
                got[name].append(_analyses(runs[name], memo))
        except BaseException as exc:  # shown by the assert below
            failed.append(exc)

    threads = [threading.Thread(target=one, args=(name,)) for name in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed
    # then each thread's results are exactly those it gives alone
    for name in runs:
        assert got[name] == [alone[name]] * 3
    # and each memo matched its own run once and holds only its own timelines' entries
    for name, tls in runs.items():
        own = {id(x) for tl in tls for x in (tl, tl.names, tl.api_corr, tl.gpu_corr)}
        for memo in memos[name]:
            assert memo.made["matching"] == 1
            held = {id(timeline_of) for ref, _ in memo._entries.values()
                    for timeline_of in _objects(ref)}
            assert held <= own


def _objects(refs: tuple[Any, ...]) -> list[object]:
    from profplug.analyzers.core.memo import _held

    return [_held(r) for r in refs]


def test_a_second_analysis_computes_again(runs: dict[str, list[Timeline]],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # given a count of the matchings and launch-call lookups made
    made = {"match": 0, "links": 0}
    real_match, real_links = matching._match, timeline._launch_calls

    def counted_match(tls: list[Timeline], memo: Memo | None) -> matching.Matching:
        made["match"] += 1
        return real_match(tls, memo)

    def counted_links(tl: Timeline) -> Any:
        made["links"] += 1
        return real_links(tl)

    monkeypatch.setattr(matching, "_match", counted_match)
    monkeypatch.setattr(timeline, "_launch_calls", counted_links)
    tls = runs["pp4"]
    # when the same timelines are analyzed twice, each time with a memo of its own
    first = whatif(tls)
    once = dict(made)
    second = whatif(tls)
    # then the second made as many as the first (nothing of the first was kept), once each
    assert once == {"match": 1, "links": len(tls)}
    assert made == {"match": 2, "links": 2 * len(tls)}
    assert _figures(first.to_dict()) == _figures(second.to_dict())


def test_a_second_report_matches_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    # given a run and a count of the matchings made
    write(RUNS["pp4"], tmp_path / "run")
    calls: list[int] = []
    real = matching._match

    def counted(tls: list[Timeline], memo: Memo | None) -> matching.Matching:
        calls.append(len(tls))
        return real(tls, memo)

    monkeypatch.setattr(matching, "_match", counted)
    # when two reports of it run one after the other
    for _ in range(2):
        analyze([tmp_path / "run"], run=[cross_rank_analysis(), whatif_analysis()], jobs=1)
    # then each matched once: the second kept nothing of the first
    assert calls == [4, 4]
