"""Ranks analyzed in forked processes give exactly the in-process results."""

from __future__ import annotations

import os
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from profplug.analyzers.scale import dispatch
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.rank import StallOptions, analyze_rank

SAMPLE = (Path(__file__).resolve().parents[4] / "sample_traces" / "pp2_infer_nsys" / "event"
          / "report.sqlite.gz")

def plain(x: Any) -> Any:
    """Arrays -> lists, recursively, so that results compare with ==."""
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.tolist())
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x


LOG: list[Path] = []  # where _spy writes the analyzing process's pid


def _spy(tl: Any, opt: StallOptions) -> dispatch.RankResult:
    with open(LOG[0], "a") as f:
        f.write(f"{os.getpid()}\n")
    return analyze_rank(tl, opt)


def test_forked_ranks_equal_in_process_ranks(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    # given a real two-rank export, and a threshold low enough to fork for it
    tls = load_timelines([SAMPLE], jobs=1)
    opt = StallOptions()
    serial = [plain(asdict(analyze_rank(t, opt))) for t in tls]
    monkeypatch.setattr(dispatch, "PARALLEL_MIN_ROWS", 0)
    LOG.clear()
    LOG.append(tmp_path / "pids")
    monkeypatch.setattr(dispatch, "analyze_rank", _spy)
    # when they are analyzed with two jobs
    forked = [plain(asdict(r)) for r in dispatch.analyze_ranks(tls, opt, jobs=2)]
    # then the work ran elsewhere and every field is the same
    pids = [int(x) for x in LOG[0].read_text().split()]
    assert len(pids) == 2 and os.getpid() not in pids
    assert len(forked) == 2 and forked == serial
    assert [r["rank"] for r in forked] == [0, 1]


def _dies_on_rank1(tl: Any, opt: StallOptions) -> dispatch.RankResult:
    if tl.rank == 1:
        os._exit(9)  # as a process killed for memory
    return analyze_rank(tl, opt)


def test_a_forked_rank_whose_process_dies_breaks_the_pool(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # given the two-rank export, forked, and rank 1's process dying
    tls = load_timelines([SAMPLE], jobs=1)
    monkeypatch.setattr(dispatch, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(dispatch, "analyze_rank", _dies_on_rank1)
    # then the caller hears it as a broken pool (a local task is then retried alone)
    with pytest.raises(BrokenProcessPool, match="died"):
        dispatch.analyze_ranks(tls, StallOptions(), jobs=2)
