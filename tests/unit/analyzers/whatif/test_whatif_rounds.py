"""The what-if where the ranks are read (``whatif/rounds.py``, ``whatif/joined_replay.py``): each
rank's graph reduced to where its times meet, the coupled replay solved on the joined
reductions, each rank's result from its own graph anchored at the solved times. Its
result is the one-process what-if's, field by field, on synthetic pipelines (tp 1-3, both
sync policies, bare names, every drop rule), on real samples, and on a run where only one
rank has a synchronize inside a pipeline send/recv."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.dropset import policy_mask
from profplug.analyzers.graph.events import build_graph
from profplug.analyzers.report.analysis import analyze_timelines
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import DropSpec, joined_replay, rounds, whatif
from profplug.analyzers.whatif.joined_replay import Link, Reduced, reduce, solve
from profplug.analyzers.whatif.result import WhatIfResult
from rounds_in_one_process import whatif_in_rounds
from synth.pipeline import PipelineSpec, write

SAMPLES = Path(__file__).resolve().parents[4] / "sample_traces"
TIMES = re.compile(r'"replay_s": [0-9.eE+-]+')


def as_json(r: WhatIfResult) -> str:
    return TIMES.sub('"replay_s": 0', json.dumps(r.to_dict(), sort_keys=True))


SPECS = [PipelineSpec(stages=4, steps=3), PipelineSpec(stages=4, tp=2, steps=3, slow_stage=2),
         PipelineSpec(stages=3, tp=3, sync="event", steps=3),
         PipelineSpec(stages=2, peer_in_name=False, steps=3)]


@pytest.mark.parametrize("spec", SPECS, ids=["pp4", "pp4-tp2-slow", "pp3-tp3-event", "bare"])
@pytest.mark.parametrize("kinds", ["policy", "device-sync", "all-sync"])
def test_the_parts_give_the_whatif_of_the_whole_run(spec: PipelineSpec, kinds: str,
                                                    tmp_path: Path) -> None:
    files, _ = write(spec, tmp_path)
    tls = load_timelines(files, jobs=1, progress=False)
    drop = DropSpec(kinds=kinds)
    whole = whatif(tls, drop, ranks=analyze_timelines(tls).ranks)  # as a report runs it
    parts = whatif_in_rounds(tls, drop)
    assert as_json(parts) == as_json(whole)
    assert any(r.saving_us > 0 for r in parts.ranks) == (spec.sync == "device")


@pytest.mark.parametrize("sample", ["pp2_infer_kineto/device", "pp2_megatron_nsys/event",
                                    "h200_three_waits/nsys", "pp2_megatron_kineto/device"])
def test_the_parts_give_the_whatif_of_a_real_run(sample: str) -> None:
    tls = load_timelines([SAMPLES / sample], jobs=1, progress=False)
    assert as_json(whatif_in_rounds(tls)) == as_json(whatif(tls))


@pytest.mark.parametrize("sample, query, kinds", [
    ("pp2_infer_kineto/device", "recv_from_prev", "policy"),
    ("pp2_megatron_kineto/device", "send_to_next", "device-sync"),
    ("h200_three_waits/nsys", "synchronize", "all-sync"),
])
def test_the_parts_give_the_drop_at_whatif_of_a_real_run(sample: str, query: str,
                                                         kinds: str) -> None:
    # --drop-at: the call site resolved over the ranks' counts, as in one process
    tls = load_timelines([SAMPLES / sample], jobs=1, progress=False)
    drop = DropSpec(kinds=kinds, callsite=query)
    whole = whatif(tls, drop)
    assert whole.callsite is not None and query in whole.callsite
    assert as_json(whatif_in_rounds(tls, drop)) == as_json(whole)


def _without_annotations(tl: Timeline) -> Timeline:
    z = np.zeros(0, dtype=np.int64)
    return replace(tl, ann_start_ns=z, ann_end_ns=z, ann_tid=z,
                 ann_name=np.zeros(0, dtype=tl.ann_name.dtype))


def test_a_rank_without_a_policy_sync_drops_nothing_when_another_has_one() -> None:
    # given a real 2-rank run where only rank 0 keeps its pipeline send/recv ranges
    tls = load_timelines([SAMPLES / "pp2_infer_kineto/device"], jobs=1, progress=False)
    tls[1] = _without_annotations(tls[1])
    assert [bool(policy_mask(t).any()) for t in tls] == [True, False]
    whole, parts = whatif(tls), whatif_in_rounds(tls)
    # then the policy rule stands (no fallback), rank 1 drops nothing, as in one process
    assert parts.drop == "policy" and parts.rank(1).dropped_calls == 0
    assert parts.rank(0).dropped_calls > 0
    assert as_json(parts) == as_json(whole)


def test_the_reduced_graph_is_where_times_meet() -> None:
    tls = load_timelines([SAMPLES / "pp2_megatron_kineto/device"], jobs=1, progress=False)
    for tl in tls:
        m = rounds.rank_model(tl, "policy")
        g = build_graph(m, drop=False)
        from profplug.analyzers.graph.commview import comm_view

        ops = comm_view(tl).op_index
        r = reduce(g, m, ops)
        # a few percent of the nodes, every NCCL kernel's end and start among them
        assert ops.size and r.n < 0.05 * g.n_nodes
        assert r.ends.size == r.starts.size == ops.size
        assert np.bincount(r.dst, minlength=r.n)[r.ends].sum() == 0  # the ends are cut


def test_a_cycle_across_the_reductions_is_not_solved() -> None:
    # two ranks of two kernels each: a starts 5 ns after the source, b 1 ns after a ends
    def rank() -> Reduced:
        i32 = np.int32
        return Reduced(5, np.array([0, 2], i32), np.array([1, 3], i32),
                       np.array([5, 1], np.int64), 0, np.array([2, 4], i32),
                       np.array([1, 3], i32))

    def links(peer_kernel: int) -> Link:
        # each kernel's run (3 ns), and each rank's kernel a waiting for the other rank's
        # kernel a (consistent) or b (contradictory: b waits for a on its own rank)
        return Link(np.array([0, 0, 1, 1, 1, 0]), np.array([0, 1, 0, 1, peer_kernel, peer_kernel]),
                    np.array([0, 0, 1, 1, 0, 1]), np.array([0, 1, 0, 1, 0, 0]),
                    np.array([3, 3, 3, 3, 1, 1]))

    assert [t.tolist() for t in solve([rank(), rank()], links(0))] == [[8, 12], [8, 12]]
    assert solve([rank(), rank()], links(1)) is None


@pytest.mark.parametrize("spec", SPECS[:2], ids=["pp4", "pp4-tp2-slow"])
def test_the_solve_level_by_level_is_the_solve_on_lists(spec: PipelineSpec, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    # given a run whose joined graph is solved level by level (the path of many big ranks)
    files, _ = write(spec, tmp_path)
    tls = load_timelines(files, jobs=1, progress=False)
    on_lists = as_json(whatif_in_rounds(tls))
    seen: list[int] = []
    real = joined_replay.longest_path_by_levels

    def levels(*a):
        seen.append(a[0])
        return real(*a)

    monkeypatch.setattr(joined_replay, "LEVELS_MIN_EDGES", 0)
    monkeypatch.setattr(joined_replay, "LEVELS_MIN_RANKS", 0)
    monkeypatch.setattr(joined_replay, "longest_path_by_levels", levels)
    # then the result is the one on lists, and a contradictory pairing still is no solve
    assert as_json(whatif_in_rounds(tls)) == on_lists and len(seen) == 2
    test_a_cycle_across_the_reductions_is_not_solved()
    assert len(seen) == 4


def test_a_wrong_solved_time_changes_the_result(tmp_path: Path) -> None:
    # the anchored ends carry the coupling: later and later ends lengthen the predicted
    # step (the comparisons above would catch a solve that got them wrong)
    files, _ = write(PipelineSpec(stages=3, steps=3), tmp_path)
    tls = load_timelines(files, jobs=1, progress=False)
    from profplug.analyzers.graph.commview import comm_view, match_views
    from profplug.analyzers.graph.pathgraph import partners
    from profplug.analyzers.stalls.rank import StallOptions

    views = [comm_view(tl) for tl in tls]
    m = match_views(views)
    ops = [v.op_index for v in views]
    red = [rounds.rank_reductions(tl, "policy", o) for tl, o in zip(tls, ops, strict=True)]
    p = rounds.plan(red, m, partners(m, lambda pos, o: tls[pos].gpu_start_ns[o]), ops,
                [v.tl.gpu_start_ns for v in views], [v.tl.gpu_end_ns for v in views],
                DropSpec(), StallOptions())
    ask = p.asks[2]
    good = rounds.rank_whatif(tls[2], ask)
    late = rounds.rank_whatif(tls[2], replace(ask, drop_ends=ask.drop_ends + 50_000 * np.arange(ask.drop_ends.size)))
    assert late.predicted_us > good.predicted_us


def test_a_graph_without_edges_is_anchored() -> None:
    # keep_edges' copy loop does not run on an empty column: the anchors are still added
    from profplug.analyzers.graph.events import ANCHOR, Graph
    from profplug.analyzers.whatif.joined_replay import anchored, reanchored

    none = np.zeros(0, np.int32)
    g = anchored(Graph(0, 1, none, none, np.zeros(0, np.int64), np.zeros(0, np.int8)),
                 np.array([0]), np.array([7]))
    assert (g.src.tolist(), g.dst.tolist(), g.w.tolist(), g.kind.tolist()) == \
        ([g.source], [g.op_end(0)], [7], [ANCHOR])
    assert reanchored(g, np.array([9])).w.tolist() == [9]
