"""Ranks on clocks that cannot be put on one axis are never joined.

A Kineto trace (wall clock, epoch ns) and an Nsight export (its session's clock) marked as
two ranks, or two Kineto ranks of which one lacks ``baseTimeNanoseconds``, made a cross-rank
critical path of 56 years with no warning. Now ranks linked by matched NCCL kernels are
aligned with the residual stated, and ranks nothing links, on different clocks, are refused
with a one-line warning; per-rank figures are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core.analysis_spec import AnalysisSpec
from profplug.analyzers.core.errors import ClocksApart, ProfplugError
from profplug.analyzers.graph.matching import match
from profplug.analyzers.readers.clocks import EPOCH, align, clock_of
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale.load import load_timelines
from synth import KinetoTrace, NsysExport
from synth.pipeline import PipelineSpec, write

from profplug.cli.main import main


def _kineto(path: Path, rank: int, base: bool = True) -> Path:
    t = KinetoTrace(rank=rank)
    for k in range(10):
        t.launch(100.0 * k, 100.0 * k + 2, 50.0)
        t.runtime("cudaDeviceSynchronize", 100.0 * k + 3, 60.0)
    d = t.to_dict()
    if not base:
        del d["baseTimeNanoseconds"]
    path.write_text(json.dumps(d))
    return path


def _nsys(path: Path, rank: int) -> Path:
    ex = NsysExport()
    p = ex.process()
    p.rank_mark(rank)
    for k in range(10):
        p.launch(100.0 * k, 100.0 * k + 2, 50.0)
        p.runtime("cudaDeviceSynchronize", 100.0 * k + 3, 60.0)
    return ex.write(path)


def test_kineto_and_nsight_ranks_without_nccl_are_not_joined(tmp_path, capsys) -> None:
    # given a Kineto rank 0 (epoch ns) and an Nsight rank 1 (session clock) in one directory
    _kineto(tmp_path / "rank0.json", 0)
    _nsys(tmp_path / "rank1.sqlite", 1)
    tls = load_timelines([tmp_path], jobs=1, progress=False)
    assert clock_of(tls[0]) == EPOCH
    assert "session clock" in clock_of(tls[1])
    # when reported with the cross-rank analysis
    rep = analyze([tmp_path], jobs=1, run=report_analyses(False))
    # then they are not joined (no NCCL kernel: the cross-rank analysis does not apply and
    # is skipped); each rank's own figures stand
    assert "cross_rank" not in rep.run
    for r in rep.ranks:
        assert r.devices[0].gpu.window_us == 950.0  # first start 2 us to last end 952 us
    assert main(["report", str(tmp_path), "--no-whatif", "-f", "json", "-o",
                 str(tmp_path.parent / "r.json")]) == 0
    doc = json.loads((tmp_path.parent / "r.json").read_text())
    assert "cross_rank" not in doc


def test_a_kineto_rank_without_base_is_not_joined_with_one_with(tmp_path) -> None:
    _kineto(tmp_path / "rank0.json", 0)
    _kineto(tmp_path / "rank1.json", 1, base=False)
    m = match(load_timelines([tmp_path], jobs=1, progress=False))
    assert m.clock_refused is not None and "own clock of" in m.clock_refused


def test_two_kineto_ranks_with_bases_are_joined_without_nccl(tmp_path) -> None:
    _kineto(tmp_path / "rank0.json", 0)
    _kineto(tmp_path / "rank1.json", 1)
    m = match(load_timelines([tmp_path], jobs=1, progress=False))
    assert m.clock_refused is None and m.offset_ns.tolist() == [0, 0]


def test_matched_nccl_kernels_align_different_clocks_with_the_residual(tmp_path) -> None:
    # given a 2-stage pipeline whose rank 1 lost its base (its own clock), shifted by 7 ms,
    # with one transfer's end 4 us off (jitter)
    paths, _ = write(PipelineSpec(stages=2, sync="device"), tmp_path)
    tls = load_timelines(paths, jobs=1, progress=False)
    tls[1].metadata["clock"] = "own"
    for k in tls[1]._ARRAYS:
        if k.endswith("_ns"):
            setattr(tls[1], k, getattr(tls[1], k) - 7_000_000)
    m = match(tls)
    assert m.clock_refused is None
    assert m.offset_ns.tolist() == [0, 7_000_000]
    assert any("put on rank 0's clock" in n and "residual +-0.0 us" in n for n in m.notes)
    e = np.stack([m.e_pos, m.e_op, m.f_pos, m.f_op], axis=1)
    sel = e[:, 0] == 0
    k1 = int(e[sel][0, 3])
    tls[1].gpu_end_ns[k1] += 4_000  # one pair off by 4 us: the median holds, residual small
    a = align(tls, e)
    assert a.offset_ns.tolist() == [0, 7_000_000] and a.refused is None


def test_mixed_sources_without_a_cross_rank_join_say_the_clocks_cannot_be_compared(
        tmp_path, capsys) -> None:
    # a Kineto rank and an Nsight rank, no NCCL kernel to align them
    _kineto(tmp_path / "rank0.json", 0)
    _nsys(tmp_path / "rank1.sqlite", 1)
    rep = analyze([tmp_path], jobs=1, run=report_analyses(None))
    said = [w for w in rep.warnings if "clocks cannot be compared" in w]
    assert len(said) == 1 and "kineto ranks [0]; nsys ranks [1]" in said[0]
    assert main(["report", str(tmp_path), "-f", "json", "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert err.count("clocks cannot be compared") == 1


def test_one_source_says_nothing_of_clocks(tmp_path) -> None:
    _kineto(tmp_path / "rank0.json", 0)
    _kineto(tmp_path / "rank1.json", 1)
    rep = analyze([tmp_path], jobs=1, run=report_analyses(None))
    assert not [w for w in rep.warnings if "clocks cannot be compared" in w]


def _refuses(error: type[ProfplugError]):
    def run(timelines: object, options: object, ranks: object) -> None:
        raise error("aligner: ranks 0 and 1 cannot share an axis")
    return run


@pytest.mark.parametrize("error, said", [(ClocksApart, 0), (ProfplugError, 1)],
                         ids=["clocks-apart", "another-refusal"])
def test_an_analysis_that_judged_the_clocks_stands_for_the_mixed_sources_warning(
        tmp_path: Path, error: type[ProfplugError], said: int) -> None:
    # given mixed sources and an analysis that aligns clocks, which refuses: with the typed
    # ClocksApart (its words name no clock), or for another reason
    _kineto(tmp_path / "rank0.json", 0)
    _nsys(tmp_path / "rank1.sqlite", 1)
    spec = AnalysisSpec(name="aligner", label="aligner", run=_refuses(error),
                        aligns_clocks=True)
    rep = analyze([tmp_path], jobs=1, run=[spec])
    # then its refusal is one warning line, and the mixed-sources warning is said only when
    # the refusal was not about the clocks
    assert "aligner: ranks 0 and 1 cannot share an axis" in rep.warnings
    assert len([w for w in rep.warnings if "clocks cannot be compared" in w]) == said
