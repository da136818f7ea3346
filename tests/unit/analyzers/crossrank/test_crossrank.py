"""Cross-rank matching and bubbles on synthetic N-rank pipelines with exact answers (us)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank import cross_rank
from profplug.analyzers.graph.matching import (
    C_GROUP,
    C_NAME,
    C_SEQ,
    CLOCK_MEDIAN,
    R_DESCRIBED,
    R_OTHER_RANK,
    R_RING,
    match,
)
from profplug.analyzers.scale.load import load_timelines
from synth.pipeline import PipelineSpec, Truth, write


def _run(tmp: Path, spec: PipelineSpec) -> tuple[list[Timeline], list[Truth]]:
    paths, truth = write(spec, tmp)
    return load_timelines(paths, jobs=1, progress=False), truth


SPECS = {
    "pp4-device": PipelineSpec(stages=4, sync="device"),
    "pp4-event": PipelineSpec(stages=4, sync="event"),
    "pp8-device-slow": PipelineSpec(stages=8, sync="device", slow_stage=5),
    "pp8-event-slow": PipelineSpec(stages=8, sync="event", slow_stage=2),
    "pp3-event-old-names": PipelineSpec(stages=3, sync="event", peer_in_name=False),
    "tp2xpp4-device": PipelineSpec(stages=4, tp=2, sync="device"),
    "tp2xpp3-event-noseq": PipelineSpec(stages=3, tp=2, sync="event", coll_seq=False),
    # the same pipelines as Nsight records them (one export per rank): the same answers
    "pp4-device-nsys": PipelineSpec(stages=4, sync="device", fmt="nsys"),
    "pp8-event-slow-nsys": PipelineSpec(stages=8, sync="event", slow_stage=2, fmt="nsys"),
    "pp3-event-old-names-nsys": PipelineSpec(stages=3, sync="event", peer_in_name=False,
                                             fmt="nsys"),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bubbles_are_exact(name: str, tmp_path: Path) -> None:
    # given a synthetic pipeline whose every NCCL kernel's wait is known
    tls, truth = _run(tmp_path, SPECS[name])
    # when the cross-rank analysis runs
    res = cross_rank(tls)
    # then each rank's NCCL time splits exactly into transfer and peer wait
    assert not res.warnings
    for b, t in zip(res.bubbles, truth, strict=True):
        assert b.wait_ns / 1000 == pytest.approx(t.wait_us, abs=1e-6), b.rank
        assert b.transfer_ns / 1000 == pytest.approx(t.transfer_us, abs=1e-6), b.rank
        assert b.idle_ns / 1000 == pytest.approx(t.idle_us, abs=1e-6), b.rank
        assert b.window_ns / 1000 == pytest.approx(t.window_us, abs=1e-6)
        assert b.transfer_ns + b.wait_ns == b.comm_ns and b.unmatched_ns == 0
        assert {r: v / 1000 for r, v in b.waits_for_ns.items()} == pytest.approx(t.waits_for)
        assert b.bubble_ns == b.idle_ns + b.wait_ns
        # and per step: transfer + wait = comm, bubble = idle + wait
        st = b.steps
        assert st is not None and len(st.step_numbers) == SPECS[name].steps
        assert np.array_equal(st.transfer_ns + st.wait_ns, st.comm_ns)
        assert (st.wait_ns <= st.comm_ns).all() and (st.wait_ns >= 0).all()
        # the JSON fields say the same
        f = res.rank_fields(b.rank)
        assert f["comm_transfer_us"] + f["comm_wait_us"] == pytest.approx(b.comm_ns / 1000)
        assert f["bubble_us"] == pytest.approx(t.idle_us + t.wait_us, abs=1e-6)


def test_rules_say_which_evidence_matched(tmp_path: Path) -> None:
    pp4 = cross_rank(_run(tmp_path / "a", SPECS["pp4-event"])[0])
    assert pp4.matching["rules"] == {R_DESCRIBED[0]: 24}
    old3 = cross_rank(_run(tmp_path / "b", SPECS["pp3-event-old-names"])[0])
    assert old3.matching["rules"] == {R_RING: 18}
    assert any("next rank in rank order" in n for n in old3.notes)
    old2 = cross_rank(_run(tmp_path / "c", replace(SPECS["pp3-event-old-names"], stages=2))[0])
    assert old2.matching["rules"] == {R_OTHER_RANK: 12}
    assert old2.bubbles[0].match_rule == R_OTHER_RANK
    tp = cross_rank(_run(tmp_path / "d", SPECS["tp2xpp4-device"])[0])
    assert tp.matching["rules"] == {R_DESCRIBED[0]: 48, C_SEQ: 24}
    noseq = cross_rank(_run(tmp_path / "e", SPECS["tp2xpp3-event-noseq"])[0])
    assert noseq.matching["rules"][C_GROUP] == 18


def test_kernels_without_any_description_pair_by_name_on_two_ranks(tmp_path: Path) -> None:
    tls, truth = _run(tmp_path, replace(SPECS["pp4-device"], stages=2))
    for tl in tls:  # a trace with no ranges at all
        tl.comm_kind = tl.comm_kind[:0]
        for k in ("comm_start_ns", "comm_end_ns", "comm_tid", "comm_peer", "comm_group",
                  "comm_seq", "comm_name", "comm_src"):
            setattr(tl, k, getattr(tl, k)[:0])
    res = cross_rank(tls)
    assert list(res.matching["rules"]) == ["k-th kernel of the same name on the two ranks"]
    # the same two-rank ring alternates send and recv, so the k-th pairs still agree
    for b, t in zip(res.bubbles, truth, strict=True):
        assert b.wait_ns / 1000 == pytest.approx(t.wait_us, abs=1e-6)


def test_skewed_clocks_are_aligned(tmp_path: Path) -> None:
    # given rank 2's clock 500 us ahead of the others (separate Kineto files)
    tls, truth = _run(tmp_path, SPECS["pp4-device"])
    tl = tls[2]
    for k in Timeline._ARRAYS:
        if k.endswith("_ns"):
            setattr(tl, k, getattr(tl, k) + 500_000)
    # when matched, then the offset is found and the bubbles do not change
    m = match(tls)
    assert m.clock_rule == CLOCK_MEDIAN
    assert m.offset_ns.tolist() == [0, 0, -500_000, 0]
    res = cross_rank(tls)
    assert any("clock offset -500.0 us" in n for n in res.notes)
    for b, t in zip(res.bubbles, truth, strict=True):
        assert b.wait_ns / 1000 == pytest.approx(t.wait_us, abs=1e-6)


def test_missing_rank_leaves_its_partners_unmatched(tmp_path: Path) -> None:
    tls, _ = _run(tmp_path, SPECS["pp4-event"])
    res = cross_rank(tls[:3])  # rank 3's trace is missing
    assert res.bubble(0).unmatched_ns > 0 and res.bubble(2).unmatched_ns > 0
    assert res.bubble(1).unmatched_ns == 0
    assert any("rank 3 is not in the traces" in w for w in res.warnings)


def test_a_lone_rank_without_peer_names_is_left_unmatched(tmp_path: Path) -> None:
    # given one rank of a pipeline whose ranges name no peer (traces from before the payload)
    tls, _ = _run(tmp_path, replace(SPECS["pp3-event-old-names"], stages=2))
    # when it is analysed alone (its peer's trace missing, as `whatif rank1.json`)
    res = cross_rank(tls[1:])
    # then its NCCL kernels stay unmatched (no other rank to guess), with a warning
    b = res.bubble(tls[1].rank)
    assert b.wait_ns == 0 and b.unmatched_ns == b.comm_ns > 0
    assert any("not matched with another rank's" in w for w in res.warnings)


def test_collectives_by_name_when_nothing_describes_them(tmp_path: Path) -> None:
    tls, _ = _run(tmp_path, SPECS["tp2xpp4-device"])
    for tl in tls:  # drop the record_param_comms rows: all-reduces become bare kernels
        keep = tl.comm_kind != 2
        for k in Timeline._ARRAYS:
            if k.startswith("comm_"):
                setattr(tl, k, getattr(tl, k)[keep])
    res = cross_rank(tls)
    # by name over every rank that has one: all 8 ranks, not the 4 TP pairs (stated rule)
    assert res.matching["rules"][C_NAME] == 6


def test_drain_lead_collapses_after_device_syncs(tmp_path: Path) -> None:
    dev = cross_rank(_run(tmp_path / "d", replace(SPECS["pp4-device"], launch_us=2.0))[0])
    evt = cross_rank(_run(tmp_path / "e", replace(SPECS["pp4-event"], launch_us=2.0))[0])
    for r in range(4):
        d, e = dev.drain(r), evt.drain(r)
        assert d.lead_p50_ns is not None and e.lead_p50_ns is not None
        assert e.lead_p50_ns > 3 * d.lead_p50_ns  # the host stays ahead with event waits
        assert e.depth_mean > d.depth_mean
        assert d.empty_ns > e.empty_ns  # the queue empties after each synchronize
        assert len(d.steps_lead_p50_ns) == 6 and d.steps_depth_max.max() >= 1


def _nsys_ring(tmp: Path, *, profplug_names: bool) -> list[Timeline]:
    """``synth.nsys_ring`` read back: three ranks of one Nsight export in a ring."""
    from profplug.analyzers.readers.nsys.reader import read_nsys
    from synth import nsys_ring

    return read_nsys(nsys_ring(tmp / "ring.sqlite", profplug_names=profplug_names))


@pytest.mark.parametrize("profplug_names", [True, False])
def test_nsys_ring_of_three(profplug_names: bool, tmp_path: Path) -> None:
    res = cross_rank(_nsys_ring(tmp_path, profplug_names=profplug_names))
    rule = R_DESCRIBED[0] if profplug_names else R_DESCRIBED[3]
    assert res.matching["rules"] == {rule: 3}
    assert res.matching["clock"]["rule"].startswith("one clock")
    # 0 -> 1 and 1 -> 2 start together; rank 2's send (30) waits for rank 0's recv (40)
    assert {b.rank: b.wait_ns / 1000 for b in res.bubbles} == {0: 0.0, 1: 0.0, 2: 10.0}
    assert res.bubble(2).waits_for_ns == {0: 10_000}


@pytest.mark.parametrize("n", [3, 17, 40])
def test_a_groups_edges_are_every_pair_of_ranks_in_member_order(n: int) -> None:
    from profplug.analyzers.graph.coupling import Edges, couple

    # given a group of n members, two of them on one rank, after an edge added alone
    members = [(p % (n - 1), 100 + p) for p in range(n)]
    edges = Edges()
    edges.append((9, 9, 9, 9, 9, 9))
    couple(members, 4, edges)
    # then one edge each way between members of different ranks, in the members' order
    want = [(9, 9, 9, 9, 9, 9)] + [(a, ka, b, kb, 4, 0) for a, ka in members
                                   for b, kb in members if a != b]
    got = [tuple(int(x) for x in row) for row in edges.array()]
    assert got == want and len(got) == 1 + n * (n - 1) - 2
