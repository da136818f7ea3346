"""Cross-rank matching from compact per-rank views (issue 29: only compact per-rank results
travel back from the workers): ``match_views([comm_view(tl) ...])`` is ``match(tls)``, field
by field, on synthetic pipelines, hand-made edge cases and every 2-rank sample."""

from __future__ import annotations

import json
import pickle
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import sample_cache
from profplug.analyzers.core import ranges
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.commview import (
    CommView,
    array_bytes,
    comm_view,
    match_views,
)
from profplug.analyzers.graph.matching import (
    C_NAME,
    CLOCK_MEDIAN,
    CLOCK_ONE,
    CLOCK_SINGLE,
    R_DESCRIBED,
    R_ORDER,
    R_RING,
    Matching,
    match,
)
from profplug.analyzers.readers.nsys.reader import read_nsys
from profplug.analyzers.scale.load import load_timelines
from synth import NCCL, KinetoTrace, nsys_ring
from synth.pipeline import PipelineSpec, write


def differences(a: Matching, b: Matching) -> list[str]:
    """The fields of ``a`` and ``b`` that differ (arrays: values and dtype)."""
    out = []
    for f in fields(Matching):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            same = np.array_equal(x, y) and x.dtype == y.dtype
        elif f.name == "comm_ops":
            same = len(x) == len(y) and all(np.array_equal(p, q) and p.dtype == q.dtype
                                            for p, q in zip(x, y, strict=False))
        else:
            same = x == y
        if not same:
            out.append(f.name)
    return out


def check(tls: list[Timeline]) -> Matching:
    """``match_views`` of the views equals ``match`` of the timelines; returns the latter."""
    want = match(tls)
    got = match_views([comm_view(tl) for tl in tls])
    assert differences(got, want) == []
    return want


def _run(tmp: Path, spec: PipelineSpec) -> list[Timeline]:
    paths, _ = write(spec, tmp)
    return load_timelines(paths, jobs=1, progress=False)


SPECS = {
    "pp4-device": PipelineSpec(stages=4, sync="device"),
    "pp4-event": PipelineSpec(stages=4, sync="event"),
    "pp3-event-bare-names": PipelineSpec(stages=3, sync="event", peer_in_name=False),
    "pp2-device-bare-names": PipelineSpec(stages=2, sync="device", peer_in_name=False),
    "pp5-event-slow": PipelineSpec(stages=5, sync="event", slow_stage=3),
    "tp2xpp4-device": PipelineSpec(stages=4, tp=2, sync="device"),
    "tp3xpp2-event-noseq": PipelineSpec(stages=2, tp=3, sync="event", coll_seq=False),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_views_match_as_the_timelines_on_synthetic_pipelines(name: str,
                                                              tmp_path: Path) -> None:
    # given a synthetic pipeline; when matched from views and from whole timelines
    m = check(_run(tmp_path, SPECS[name]))
    # then the same (checked), and the matching is not trivial
    assert m.e_op.size and not m.warnings


def test_the_equality_can_fail(tmp_path: Path) -> None:
    # given a pipeline whose NCCL kernels sit among compute kernels
    tls = _run(tmp_path, SPECS["pp4-event"])
    views = [comm_view(tl) for tl in tls]
    want = match(tls)
    # then matching the views without renumbering their ops is not the same matching
    assert differences(match([v.tl for v in views]), want) == ["e_op", "f_op", "comm_ops"]
    # nor is a view whose op index is off by one, nor one of the wrong rank order
    off = [CommView(v.tl, v.op_index + 1) for v in views]
    assert differences(match_views(off), want) == ["e_op", "f_op", "comm_ops"]
    assert "ranks" in differences(match_views(views[::-1]), want)


def test_ring_and_kth_rules_and_skewed_clocks(tmp_path: Path) -> None:
    # given a 3-stage pipeline of bare range names (ring rule) whose rank 1 lost its base
    # (own clock) and runs 7 ms behind, and a 2-rank one with no comm rows at all (k-th rule)
    tls = _run(tmp_path / "a", SPECS["pp3-event-bare-names"])
    tls[1].metadata["clock"] = "own"
    for k in Timeline._ARRAYS:
        if k.endswith("_ns"):
            setattr(tls[1], k, getattr(tls[1], k) - 7_000_000)
    m = check(tls)
    assert m.rule_counts == {R_RING: 18} and m.clock_rule == CLOCK_MEDIAN
    assert m.offset_ns.tolist() == [0, 7_000_000, 0]
    assert any("put on rank 0's clock" in n for n in m.notes)
    bare = _run(tmp_path / "b", SPECS["pp2-device-bare-names"])
    for tl in bare:  # a rank with NCCL kernels but no comm rows
        for k in Timeline._ARRAYS:
            if k.startswith("comm_"):
                setattr(tl, k, getattr(tl, k)[:0])
    assert list(check(bare).rule_counts) == [R_ORDER]


def test_collectives_by_name_when_nothing_describes_them(tmp_path: Path) -> None:
    tls = _run(tmp_path, SPECS["tp2xpp4-device"])
    for tl in tls:  # the all-reduces lose their record_param_comms rows: bare kernels
        keep = tl.comm_kind != 2
        for k in Timeline._ARRAYS:
            if k.startswith("comm_"):
                setattr(tl, k, getattr(tl, k)[keep])
    assert check(tls).rule_counts[C_NAME] == 6


def _rank(rank: int, sends: int, recvs: int, *, ranged: bool = True, base: bool = True,
          peer: int | None = None) -> KinetoTrace:
    """A rank with compute kernels between its NCCL kernels: ``sends`` to ``peer`` then
    ``recvs`` from it (profplug ranges naming the peer when ``ranged``, else bare kernels)."""
    t = KinetoTrace(rank=rank, pid=100 + rank)
    peer = 1 - rank if peer is None else peer
    at = 0.0
    for kind, n in (("send", sends), ("recv", recvs)):
        for _ in range(n):
            t.launch(at, at + 2, 5.0)  # a compute kernel first
            if ranged:
                base_name = ranges.SEND if kind == "send" else ranges.RECV
                t.annotation(ranges.p2p_range(base_name, peer), at + 10, 8.0)
            t.launch(at + 11, at + 20, 10.0, name=NCCL, stream=20)
            at += 100.0
    t.launch(at, at + 2, 5.0)
    return t


def _load(tmp: Path, traces: list[KinetoTrace], bases: list[bool] | None = None
          ) -> list[Timeline]:
    for i, t in enumerate(traces):
        d = t.to_dict()
        if bases is not None and not bases[i]:
            del d["baseTimeNanoseconds"]
        (tmp / f"rank{t.rank}.json").write_text(json.dumps(d))
    return load_timelines([tmp], jobs=1, progress=False)


def test_described_pairs_with_extra_sends_leave_them_unmatched(tmp_path: Path) -> None:
    m = check(_load(tmp_path, [_rank(0, 3, 0), _rank(1, 0, 2)]))
    assert m.rule_counts == {R_DESCRIBED[0]: 2} and m.unmatched == [1, 0]
    assert any("3 send(s) from rank 0 to 1 vs 2 recv(s)" in w for w in m.warnings)


def test_bare_kernels_of_unequal_counts(tmp_path: Path) -> None:
    m = check(_load(tmp_path, [_rank(0, 3, 0, ranged=False), _rank(1, 2, 0, ranged=False)]))
    assert m.rule_counts == {R_ORDER: 2} and m.unmatched == [1, 0]
    assert any("the first 2 are matched in order" in w for w in m.warnings)


def test_a_rank_without_nccl_kernels(tmp_path: Path) -> None:
    # given ranks 0 and 1 exchanging, and rank 2 with compute kernels only
    lone = KinetoTrace(rank=2, pid=102)
    lone.launch(0.0, 2.0, 5.0)
    m = check(_load(tmp_path, [_rank(0, 2, 1), _rank(1, 1, 2), lone]))
    assert m.comm_ops[2].size == 0 and m.unmatched == [0, 0, 0]
    assert m.rule_counts == {R_DESCRIBED[0]: 3}


def test_ranks_on_clocks_that_cannot_be_joined(tmp_path: Path) -> None:
    # given rank 0 on the wall clock sending to a rank not traced, and rank 1 on its own
    # clock (no base) with no NCCL kernel: nothing links them
    lone = KinetoTrace(rank=1, pid=101)
    lone.launch(0.0, 2.0, 5.0)
    tls = _load(tmp_path, [_rank(0, 2, 0, peer=3), lone], bases=[True, False])
    m = check(tls)
    assert m.clock_refused is not None and "own clock of" in m.clock_refused
    assert m.unmatched == [2, 0] and any("rank 3 is not in the traces" in w
                                         for w in m.warnings)
    # and rank 0 alone: one rank, no clocks to align, its kernels unmatched
    alone = check(tls[:1])
    assert alone.clock_rule == CLOCK_SINGLE and alone.unmatched == [2]


def test_nsight_ring_of_three_described_by_nccl_nvtx_payload(tmp_path: Path) -> None:
    # given three processes of one Nsight export, a ring 0 -> 1 -> 2 -> 0, each send and
    # recv described by NCCL's own NVTX range with its payload, compute kernels between
    m = check(read_nsys(nsys_ring(tmp_path / "ring.sqlite", profplug_names=False,
                                  compute=True)))
    assert m.rule_counts == {R_DESCRIBED[3]: 3} and m.clock_rule == CLOCK_ONE
    assert [c.tolist() for c in m.comm_ops] == [[1, 3]] * 3  # full numbering


def test_a_view_grows_with_nccl_kernels_not_compute(tmp_path: Path) -> None:
    # given the same 2-stage pipeline with 2 and with 20 compute kernels per step
    few = _run(tmp_path / "a", PipelineSpec(stages=2, layers=2))
    many = _run(tmp_path / "b", PipelineSpec(stages=2, layers=20))
    for a, b in zip(few, many, strict=True):
        # then the timeline grows, its view does not (the same NCCL kernels and comm rows)
        assert array_bytes(b) > 3 * array_bytes(a)
        va, vb = comm_view(a), comm_view(b)
        assert va.nbytes == vb.nbytes and va.tl.names == vb.tl.names
        assert va.tl.n_gpu == 12  # 6 sends and 6 recvs


SAMPLE_RUNS = [f"{run}/{policy}" for run in (
    "pp2_infer_kineto", "pp2_infer_nsys", "pp2_megatron_kineto", "pp2_megatron_nsys",
    "pp2_infer_repeats/kineto2", "pp2_infer_repeats/nsys2") for policy in ("device", "event")]


@pytest.mark.parametrize("run", SAMPLE_RUNS)
def test_views_match_as_the_timelines_on_every_two_rank_sample(run: str) -> None:
    tls = sample_cache.timelines(run)  # read-only arrays: the view writes into none
    assert len(tls) == 2
    m = check(tls)
    assert m.e_op.size and m.clock_refused is None


def test_a_view_is_small_and_travels(tmp_path: Path) -> None:
    # given a real 2-rank sample (Megatron, Kineto)
    tls = sample_cache.timelines("pp2_megatron_kineto/device")
    views = [comm_view(tl) for tl in tls]
    # then its arrays are a small fraction of the timeline's: measured 2.8% (rank 0: 7.0 of
    # 256 kB of arrays; 9.4 of 267 kB pickled; 40 of 1,820 GPU ops, 40 of 3,392 API calls,
    # every one of its 60 comm rows), the symbol table cut from 42 names to 5
    for tl, v in zip(tls, views, strict=True):
        assert v.nbytes < 0.25 * array_bytes(tl)
        assert len(v.tl.names) < 0.25 * len(tl.names)
        assert v.tl.n_gpu == v.op_index.size < tl.n_gpu / 4
    # and a pickle round trip (as it travels from a worker) matches the same
    back = pickle.loads(pickle.dumps(views))
    assert differences(match_views(back), match(tls)) == []
    assert np.array_equal(back[0].op_index, views[0].op_index)
