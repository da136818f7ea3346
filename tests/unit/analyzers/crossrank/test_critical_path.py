"""The cross-rank critical path on traces with known answers (times in us)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core import ranges
from profplug.analyzers.crossrank import cross_rank
from profplug.analyzers.crossrank.critical import CATEGORIES
from profplug.analyzers.graph import pathgraph
from profplug.analyzers.graph.matching import match
from profplug.analyzers.scale.load import load_timelines
from synth import KinetoTrace
from synth.pipeline import PipelineSpec, write

NCCL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


def _hand_made(tmp: Path, device_sync: bool) -> list[Path]:
    """Rank 0: A (5-105) then a send (105-115); rank 1: a recv (5-115, waits 100) then B
    (115-165). With ``device_sync``, rank 1's host syncs after the recv (returns at 120) and
    launches B at 125 (B runs 130-180)."""
    r0, r1 = KinetoTrace(rank=0), KinetoTrace(rank=1)
    r0.annotation("ProfilerStep#0", 0, 200)
    r1.annotation("ProfilerStep#0", 0, 200)
    r0.launch(0, 5, 100, name="gemm_a")
    r0.annotation(ranges.p2p_range(ranges.SEND, 1), 1, 8)
    r0.runtime("cudaStreamWaitEvent", 2, 1)
    r0.launch(4, 105, 10, name=NCCL, stream=20)
    r1.annotation(ranges.p2p_range(ranges.RECV, 0), 0, 121 if device_sync else 8)
    r1.launch(0, 5, 110, name=NCCL, stream=20)
    r1.runtime("cudaStreamWaitEvent", 2, 1)
    if device_sync:
        r1.runtime("cudaDeviceSynchronize", 3, 117)  # returns at 120
        r1.launch(125, 130, 50, name="gemm_b")
    else:
        r1.launch(4, 115, 50, name="gemm_b")
    return [r0.write(tmp / "r0.json"), r1.write(tmp / "r1.json")]


def test_path_follows_the_recv_to_the_sender(tmp_path: Path) -> None:
    # given the hand-made run without a sync: B waits for the recv, which waited for rank 0
    res = cross_rank(load_timelines(_hand_made(tmp_path, False), jobs=1, progress=False))
    cp = res.critical_path
    # then the path is B (50, rank 1) <- transfer (10, rank 1) <- A (100, rank 0):
    # the recv's 100 us wait is slack, the path crosses to the sender
    assert cp.basis == "step" and cp.n_steps == 1 and cp.length_us == 160.0
    assert cp.by_category == pytest.approx({"compute": 150 / 160, "transfer": 10 / 160,
                                            "peer_wait": 0.0, "host_launch": 0.0,
                                            "device_sync": 0.0, "event_sync": 0.0,
                                            "other": 0.0})
    assert cp.by_rank == pytest.approx({"0": 100 / 160, "1": 60 / 160})
    assert cp.top_rank == 0
    assert cp.steps[0]["span_us"] == 160.0


def test_path_crosses_the_host_and_the_synchronize(tmp_path: Path) -> None:
    res = cross_rank(load_timelines(_hand_made(tmp_path, True), jobs=1, progress=False))
    cp = res.critical_path
    # B (130-180) <- its launch at 125 (host launch 125-130) <- host since the sync returned
    # (120-125) <- the sync's wake-up after the recv ended (115-120) <- transfer (105-115)
    # <- A (5-105) on rank 0
    assert cp.length_us == 175.0
    expect = {"compute": 150, "transfer": 10, "host_launch": 10, "device_sync": 5}
    assert cp.by_category == pytest.approx({c: expect.get(c, 0) / 175 for c in CATEGORIES},
                                           abs=1e-4)  # shares have 4 decimals
    assert cp.by_rank == pytest.approx({"0": 100 / 175, "1": 75 / 175}, abs=1e-4)
    sites = {(t["rank"], t["category"]): t["callsite"] for t in cp.top_callsites}
    assert sites[(1, "device_sync")] == "profplug.recv_from_prev_pipeline_rank_"


def _path(tmp: Path, spec: PipelineSpec):
    paths, _ = write(spec, tmp)
    return cross_rank(load_timelines(paths, jobs=1, progress=False)).critical_path


@pytest.mark.parametrize("stages", [4, 8])
@pytest.mark.parametrize("sync", ["device", "event"])
def test_slow_stage_sits_on_the_path(stages: int, sync: str, tmp_path: Path) -> None:
    cp = _path(tmp_path, PipelineSpec(stages=stages, sync=sync, slow_stage=2, steps=5))
    assert cp.n_steps == 5 and cp.top_rank == 2
    assert sum(cp.by_category.values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(cp.by_rank.values()) == pytest.approx(1.0, abs=1e-3)
    assert cp.by_rank["2"] == max(cp.by_rank.values())
    assert cp.by_category["peer_wait"] == 0.0
    for st in cp.steps:
        assert st["length_us"] == pytest.approx(st["span_us"], abs=1e-6)  # a chain, no holes
    if sync == "event":  # the host runs ahead: GPU work and transfers only
        assert cp.by_category["host_launch"] == 0.0 and cp.by_category["device_sync"] == 0.0
        assert cp.by_category["compute"] + cp.by_category["transfer"] == pytest.approx(1.0)
    else:  # each synchronize puts its wake-up and the following launches on the path
        assert cp.by_category["device_sync"] > 0 and cp.by_category["host_launch"] > 0


def test_the_first_stage_launch_bound_host_is_on_the_path(tmp_path: Path) -> None:
    # given hosts that launch slower than the GPU runs (40 us per launch, 5 us kernels):
    # stage 0's host sets the pace; the later stages' hosts ran ahead while they waited
    spec = PipelineSpec(stages=4, sync="event", launch_us=40.0, kernel_us=5.0, steps=4)
    cp = _path(tmp_path, spec)
    assert cp.top_rank == 0 and cp.by_category["host_launch"] > 0.6
    assert cp.by_rank["0"] == pytest.approx(cp.by_category["host_launch"])


@pytest.mark.parametrize("sync", ["device", "event"])
def test_binding_edges_do_not_depend_on_the_block_size(sync: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # given a 4-stage run whose ranks' graphs have far more edges than a block of 7 (nodes
    # with several incoming edges fall on block boundaries)
    paths, _ = write(PipelineSpec(stages=4, sync=sync, slow_stage=1, steps=4), tmp_path)
    tls = load_timelines(paths, jobs=1, progress=False)
    m = match(tls)
    parts = pathgraph.run_partners(tls, m)

    def graphs() -> list[pathgraph.RankGraph]:
        return [pathgraph.rank_graph(tl, i, parts[i], m.comm_ops[i], m.offset_ns, 2_000)
                for i, tl in enumerate(tls)]

    whole = graphs()
    # when the binding edges are chosen 7 edges (rounded to whole nodes) at a time
    monkeypatch.setattr(pathgraph, "_BLOCK", 7)
    blocks = graphs()
    # then every node has the same binding edge and host run as in one block
    assert sum(int((g.bind_kind >= 0).sum()) for g in whole) > 50 * 7  # many blocks
    for a, b in zip(whole, blocks, strict=True):
        assert np.array_equal(a.bind_kind, b.bind_kind)
        assert np.array_equal(a.bind_src, b.bind_src)
        assert np.array_equal(a.host_root, b.host_root)


def _whole_run_bindings(tls: list, m: object, tol: int) -> tuple[np.ndarray, ...]:
    """The binding edges and host runs from the run's one graph (every rank's model at
    once): what ``PathGraph`` computed before it was built one rank at a time."""
    from profplug.analyzers.core import classify
    from profplug.analyzers.core.timeline import at_or
    from profplug.analyzers.graph.events import build_graph
    from profplug.analyzers.graph.model import DROP_NONE, DropSpec, build_model

    md = build_model(tls, DropSpec(kinds=DROP_NONE), matching=m)
    extra = [x for x in (pathgraph.inferred_waits(md, tol), pathgraph.seen_stream_waits(md, tol))
             if x]
    rec = np.concatenate([md.a_start, md.a_end, md.o_start, md.o_end, [0]]).astype(np.int64)
    o_launch = at_or(md.a_start, md.o_top, 0) + np.where(md.o_top >= 0, md.o_off, 0)
    g = build_graph(md, drop=False)
    src = np.concatenate([g.src, *(x[0] for x in extra)])
    dst = np.concatenate([g.dst, *(x[1] for x in extra)])
    w = np.concatenate([g.w, *(x[2] for x in extra)])
    kind = np.concatenate([g.kind, *(np.full(x[1].size, x[3], dtype=np.int8) for x in extra)])
    a_kind = np.concatenate([classify.kinds_for_symbols(tl.names)[tl.api_name] for tl in tls])
    sync = (a_kind == classify.DEVICE) | (a_kind == classify.EVENT)
    bk, bs = pathgraph.binding_edges(src, dst, w, kind, g.n_a, g.n_o, rec, o_launch, tol, sync)
    return rec, bk, bs, pathgraph.host_runs(bk, bs, g.n_a, sync), o_launch


@pytest.mark.parametrize("spec", [
    PipelineSpec(stages=4, sync="device", slow_stage=1, steps=4),
    PipelineSpec(stages=4, sync="event", launch_us=40.0, kernel_us=5.0, steps=4),
    PipelineSpec(stages=3, sync="event", peer_in_name=False, steps=3),
    PipelineSpec(stages=2, tp=2, sync="device", slow_stage=0, steps=3),
    PipelineSpec(stages=2, tp=3, sync="event", coll_seq=False, steps=3),
], ids=["device-slow", "event-launch-bound", "bare-names", "tp2", "tp3-no-seq"])
def test_the_graph_built_rank_by_rank_binds_as_the_runs_graph(spec: PipelineSpec,
                                                              tmp_path: Path) -> None:
    # given a run whose ranks are coupled by matched sends, recvs and all-reduces
    paths, _ = write(spec, tmp_path)
    tls = load_timelines(paths, jobs=1, progress=False)
    m = match(tls)
    assert m.e_pos.size  # kernels are matched across ranks
    # when the critical path's graph is built one rank at a time (each rank's model alone,
    # its partners' starts as extra nodes)
    parts = pathgraph.run_partners(tls, m)
    gs = [pathgraph.rank_graph(tl, i, parts[i], m.comm_ops[i], m.offset_ns, 2_000)
          for i, tl in enumerate(tls)]
    # then every node has the time, binding edge and host run the run's one graph gives it
    rec, bk, bs, root, o_launch = _whole_run_bindings(tls, m, 2_000)
    n_a = sum(g.n_a for g in gs)
    n_o = sum(g.n_o for g in gs)
    a_lo = np.cumsum([0] + [g.n_a for g in gs])
    o_lo = np.cumsum([0] + [g.n_o for g in gs])
    for i, g in enumerate(gs):
        na, no = g.n_a, g.n_o
        # the rank's nodes in the run's ids; its partners' starts: theirs
        run_id = np.concatenate([
            a_lo[i] + np.arange(na), n_a + a_lo[i] + np.arange(na),
            2 * n_a + o_lo[i] + np.arange(no), 2 * n_a + n_o + o_lo[i] + np.arange(no),
            [2 * n_a + 2 * n_o], 2 * n_a + o_lo[g.ghost_pos] + g.ghost_op])
        own = run_id[:2 * na + 2 * no]
        off = int(m.offset_ns[i])
        assert np.array_equal(g.t[:own.size], rec[own] + off)
        assert np.array_equal(g.bind_kind[:own.size], bk[own])
        src = g.bind_src[:own.size]
        assert np.array_equal(np.where(src >= 0, run_id[np.maximum(src, 0)], -1), bs[own])
        assert np.array_equal(run_id[g.host_root[:own.size]], root[own])
        assert np.array_equal(g.o_launch, o_launch[o_lo[i]:o_lo[i + 1]] + off)
    # and some node is bound across ranks (a matched partner's start)
    from profplug.analyzers.graph.events import PEER

    assert any((g.bind_kind == PEER).any() for g in gs)


def _all_paths(tls: list, tol: int = 2_000) -> tuple[list, str]:
    from profplug.analyzers.core.timeline import launch_times, launch_tops
    from profplug.analyzers.crossrank import critical
    from profplug.analyzers.stalls.per_step import step_spans

    m = match(tls)
    spans = [step_spans(tl, launch_times(tl, launch_tops(tl))) for tl in tls]
    return critical.critical_paths(tls, m, spans, tol)


@pytest.mark.parametrize("steps", [True, False], ids=["steps", "window"])
def test_a_walk_no_entry_foresaw_builds_its_rank_again(steps: bool, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from profplug.analyzers.crossrank import critical
    from profplug.analyzers.readers.base import ReadOptions

    # given a pipeline whose step paths cross ranks (a slow middle stage)
    paths, _ = write(PipelineSpec(stages=4, sync="device", slow_stage=2, steps=4), tmp_path)
    tls = load_timelines(paths, jobs=1, progress=False, read=ReadOptions())
    if not steps:  # the same run without step ranges: per GPU window
        for tl in tls:
            tl.step_start_ns, tl.step_end_ns, tl.step_num = (tl.step_num[:0],) * 3
            tl.steps_rule = None
    built: list[int] = []
    real_graph = critical.rank_graph

    def counted(tl: object, pos: int, *a: object) -> pathgraph.RankGraph:
        built.append(pos)
        return real_graph(tl, pos, *a)

    monkeypatch.setattr(critical, "rank_graph", counted)
    # when each rank's chain is recorded from the walks' entries: one graph per rank
    want, basis = _all_paths(tls)
    assert basis == ("step" if steps else "window")
    assert sorted(built) == list(range(len(tls)))
    assert any(len({s.pos for s in p.segments}) > 1 for p in want)  # paths cross ranks
    # and when no entry was recorded at all (every chain empty): each walk records what it
    # needs, building a rank's graph again wherever it goes
    built.clear()
    monkeypatch.setattr(critical, "entries", lambda walks, partners: ({}, {}))
    got, _ = _all_paths(tls)
    # then the walks are the same, segment by segment
    assert len(built) > len(tls)
    assert [(p.step, p.lo_ns, p.hi_ns, p.segments) for p in got] == \
        [(p.step, p.lo_ns, p.hi_ns, p.segments) for p in want]


def test_node_times_read_in_pieces_are_the_joined_times() -> None:
    # given a rank's recorded times as separate arrays (one of them empty, one int32)
    rng = np.random.default_rng(5)
    parts = [rng.integers(0, 2**40, n) for n in (7, 0, 5, 1)]
    parts.append(np.arange(3, dtype=np.int32))
    times = pathgraph.NodeTimes(parts)
    whole = times.joined()
    assert times.size == whole.size == 16 and whole.dtype == np.int64
    # then any node ids, boundaries included, read what the joined array holds
    idx = np.concatenate([np.arange(16), rng.integers(0, 16, 50)]).reshape(2, -1)
    assert np.array_equal(times[idx], whole[idx])
    assert times[np.zeros(0, dtype=np.int64)].size == 0
