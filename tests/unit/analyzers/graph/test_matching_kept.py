"""One NCCL matching per report: the cross-rank analysis (and its critical path) and the
what-if share it through the report's Memo; one launch-call lookup per timeline
(synthetic 4-stage pipeline)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers import analyze, cross_rank_analysis
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import launch_calls
from profplug.analyzers.graph import matching
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import whatif_analysis
from synth.pipeline import PipelineSpec, write

SPEC = PipelineSpec(stages=4, steps=5, sync="device")


def test_a_match_is_kept_by_its_memo_only(tmp_path: Path) -> None:
    # given a 4-rank run
    write(SPEC, tmp_path / "run")
    tls = load_timelines([tmp_path / "run"], jobs=1, progress=False)
    # when matched twice without a memo: two results
    assert matching.match(tls) is not matching.match(tls)
    # then with one: one, for the same timelines in the same order only
    memo = Memo()
    first = matching.match(tls, memo)
    assert matching.match(list(tls), memo) is first
    assert matching.match(tls[::-1], memo) is not first
    assert matching.match(tls[:2], memo) is not first
    assert matching.match(tls, Memo()) is not first  # another memo: its own


def test_a_report_matches_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a 4-rank run and a count of the matchings made
    write(SPEC, tmp_path / "run")
    calls: list[int] = []
    real = matching._match

    def counted(tls: list, memo: Memo | None) -> matching.Matching:
        calls.append(len(tls))
        return real(tls, memo)

    monkeypatch.setattr(matching, "_match", counted)
    # when the report runs the cross-rank analysis and the what-if
    rep = analyze([tmp_path / "run"], run=[cross_rank_analysis(), whatif_analysis()],
                  jobs=1)
    # then both are there, from one matching of the 4 ranks
    assert {"cross_rank", "whatif"} <= set(rep.run)
    assert calls == [4]


def test_launch_calls_are_kept_per_timeline_by_the_memo(tmp_path: Path) -> None:
    # given one rank's timeline
    write(SPEC, tmp_path / "run")
    tl = load_timelines([tmp_path / "run"], jobs=1, progress=False)[0]
    plain = launch_calls(tl)
    assert (plain >= 0).all() and launch_calls(tl) is not plain  # no memo: each time
    memo = Memo()
    # when looked up twice with one memo: one read-only result, the same values
    a = launch_calls(tl, memo)
    assert launch_calls(tl, memo) is a and not a.flags.writeable
    assert np.array_equal(a, plain)
    # and a timeline with other correlation ids gets its own
    other = replace(tl, gpu_corr=np.full(tl.n_gpu, -1, dtype=np.int64))
    assert (launch_calls(other, memo) == -1).all()
    assert launch_calls(tl, Memo()) is not a  # another memo keeps nothing of this one's
