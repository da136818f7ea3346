"""The what-if's dependency graph and its replay (hand-computed answers, times in us): host
calls nested in another call (Kineto and Nsight), idle between groups of steps (the same
step figure in report and what-if), a planted contradictory NCCL pairing (a cycle), and the
graph's edges for a known trace.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.graph.events import KINDS, build_graph, dropped_graph
from profplug.analyzers.graph.longest_path import MIN_NS
from profplug.analyzers.graph.model import DROP_NONE, DropSpec, build_model
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.readers.nsys.reader import read_nsys
from profplug.analyzers.render.table import render_table
from profplug.analyzers.render.whatif_table import render_whatif_table
from profplug.analyzers.report.analysis import analyze_timelines
from profplug.analyzers.whatif import whatif, whatif_analysis
from profplug.analyzers.whatif.simulate import replay
from synth import KinetoTrace, NsysExport, api_is_top, nested, two_ranks


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_a_call_nested_in_another_runs_through_the_whatif(tmp_path: Path, fmt: str) -> None:
    # given one host call nested in another on the same thread (it used to leave an op
    # untimed: TypeError in the replay)
    if fmt == "kineto":
        k = KinetoTrace(rank=0)
        nested(k)
        tl = read_kineto(k.write(tmp_path / "nested.json"), 0)
    else:
        ex = NsysExport()
        p = ex.process(4242)
        p.rank_mark(0)
        nested(p)
        tl = read_nsys(ex.write(tmp_path / "nested.sqlite"))[0]
    assert (~api_is_top(tl)).sum() == 3 * 2  # the driver calls are nested
    res = whatif([tl])
    r = res.rank(0)
    # then: steps start (kernel) 100 us apart, replayed exactly; without the sync the host
    # step is 36 us and the GPU-bound kernels run back to back: 60 us apart
    assert (r.recorded_us, r.replayed_us) == pytest.approx((100.0, 100.0), abs=1e-3)
    assert r.predicted_us == pytest.approx(60.0, abs=1e-3)
    assert r.dropped_calls == 3  # the top-level synchronizes, not the nested ones
    m = build_model([tl])
    for drop in (False, True):
        rp = replay(m, drop)
        assert (rp.t[:-1] > MIN_NS).sum() == 2 * int(m.a_top.size) + 2 * tl.n_gpu - \
            2 * int((~api_is_top(tl)).sum())  # every node of the graph is timed
        assert (rp.o_start > MIN_NS).all() and (rp.a_start > MIN_NS).all()
        top = m.a_top
        inside = (rp.a_start >= rp.a_start[top]) & (rp.a_end <= rp.a_end[top])
        assert inside.all()  # nested calls stay inside their top-level call


def test_idle_between_groups_of_steps_same_step_in_report_and_whatif(tmp_path: Path) -> None:
    # given 4 groups of 3 steps of 100 us (the single-stream loop of test_whatif), 1 ms of
    # idle between the groups, as a server between requests
    t = KinetoTrace(rank=0)
    n = 0
    for g in range(4):
        base = g * 1300.0
        for i in range(3):
            T = base + 100.0 * i
            t.annotation(f"ProfilerStep#{n}", T, 100.0)
            t.launch(T, T + 5, 60.0)
            t.runtime("cudaDeviceSynchronize", T + 6, 64.0)
            n += 1
    tl = read_kineto(t.write(tmp_path / "tiled.json"), 0)
    rep = analyze_timelines([tl], run=[whatif_analysis()])
    w = rep.run["whatif"].rank(0)
    # then the what-if's recorded step is the report's own step figure, and the replay
    # reproduces it
    assert w.basis == "step" and w.n_steps == 12
    assert w.recorded_us == pytest.approx(rep.rank(0).steps.period_us, abs=1e-3)
    assert w.replayed_us == pytest.approx(w.recorded_us, abs=1e-3)
    # with the report's figure (the median over the non-outlier steps, steps.stats): the 8
    # distances within groups (100 -> 60: GPU-bound); the 3 across the idle (1100 us) are
    # outlier steps, out of the basis
    assert w.recorded_us - w.predicted_us == pytest.approx(40.0, abs=1e-3)
    # and the idle between the groups is shown apart: 3 outlier steps of 1100 us, each
    # 1000 us beyond the 100 us step, in the report and the what-if alike
    assert rep.rank(0).steps.between_steps_idle_us == pytest.approx(3000.0, abs=1e-3)
    assert w.between_steps_idle_us == pytest.approx(3000.0, abs=1e-3)
    table, wtab = io.StringIO(), io.StringIO()
    render_table(rep, table)
    render_whatif_table(rep.run["whatif"], wtab)
    assert "between steps: 3,000.0 us in outlier steps beyond the step time" in \
        " ".join(table.getvalue().split())
    assert "between steps: rank 0: 3,000.0 us in the recorded run's outlier steps" in \
        " ".join(wtab.getvalue().split())


def test_steps_without_a_pause_have_no_idle_between_steps(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    for i in range(8):
        t.annotation(f"ProfilerStep#{i}", 100.0 * i, 100.0)
        t.launch(100.0 * i, 100.0 * i + 5, 60.0)
        t.runtime("cudaDeviceSynchronize", 100.0 * i + 6, 64.0)
    rep = analyze_timelines([read_kineto(t.write(tmp_path / "plain.json"), 0)],
                            run=[whatif_analysis()])
    assert rep.rank(0).steps.between_steps_idle_us == 0.0
    assert rep.run["whatif"].rank(0).between_steps_idle_us == 0.0
    wtab = io.StringIO()
    render_whatif_table(rep.run["whatif"], wtab)
    assert "between steps" not in wtab.getvalue()


def test_a_contradictory_pairing_is_reported_and_broken(tmp_path: Path) -> None:
    # given two ranks whose NCCL kernels are paired crosswise (step 0's send with step 1's
    # recv and the reverse): each kernel's end waits for its partner's start, which waits
    # (through a synchronize) for that kernel's end: a cycle
    tls = [read_kineto(p, i) for i, p in enumerate(two_ranks(tmp_path))]
    m = build_model(tls, DropSpec(kinds=DROP_NONE))
    nccl = np.nonzero(m.o_peer >= 0)[0]
    r0 = nccl[m.o_rank[nccl] == 0]
    r1 = nccl[m.o_rank[nccl] == 1]
    assert r0.size == r1.size == 2
    peer = m.o_peer.copy()
    peer[r0], peer[r1] = r1[::-1], r0[::-1]
    xfer = np.full(m.o_start.size, 10_000, dtype=np.int64)
    m = replace(m, o_peer=peer, o_xfer=np.where(peer >= 0, xfer, 0))
    # when replayed
    rp = replay(m, drop=False)
    # then the earliest started kernel of the cycle keeps its recorded duration, the
    # warning names both kernels and their ranks, and every node is timed
    assert len(rp.forced) == 1
    j = rp.forced[0]
    assert rp.o_end[j] - rp.o_start[j] == m.o_end[j] - m.o_start[j]
    assert any("contradictory NCCL pairing" in w and "rank 0" in w and "rank 1" in w
               for w in rp.warnings)
    g = rp.graph
    timed = np.ones(g.n_nodes, dtype=bool)
    timed[:2 * g.n_a] = np.concatenate([m.a_top == np.arange(g.n_a)] * 2)
    assert (rp.t[timed] > MIN_NS).all()


def test_edges_of_a_known_trace(tmp_path: Path) -> None:
    # given the nested-call trace: 3 steps of (launch, nested driver launch, sync, nested
    # sync): 6 top-level calls, 3 kernels
    k = KinetoTrace(rank=0)
    nested(k)
    m = build_model([read_kineto(k.write(tmp_path / "nested.json"), 0)])
    g = build_graph(m, drop=False)
    kinds = {KINDS[i]: int((g.kind == i).sum()) for i in range(len(KINDS))}
    # then: one anchor (the thread's first call), 5 host gaps, 6 call costs, 3 syncs
    # (each waits for its step's kernel), 3 launches, 2 stream edges, 3 op runs
    assert kinds == {"anchor": 1, "host": 5, "call": 6, "sync": 3, "launch": 3, "stream": 2,
                     "stream_wait": 0, "run": 3, "peer": 0}
    # and the dropped replay has no sync edge
    assert int((build_graph(m, drop=True).kind == KINDS.index("sync")).sum()) == 0


def test_the_dropped_graph_derived_from_the_recorded_one_is_the_dropped_build(
        tmp_path: Path) -> None:
    # given the 2-rank decode loop (p2p pairs, device syncs dropped) and the nested-call trace
    k = KinetoTrace(rank=0)
    nested(k)
    runs = [[read_kineto(k.write(tmp_path / "nested.json"), 0)],
            [read_kineto(p, i) for i, p in enumerate(two_ranks(tmp_path))]]
    for tls in runs:
        m = build_model(tls, DropSpec("device-sync"))
        assert m.a_dropped.any()
        # when the dropped graph is derived from the recorded graph's arrays
        got = dropped_graph(build_graph(m, drop=False), m)
        want = build_graph(m, drop=True)
        # then it has the same edges, in the same order (binding edges are the lowest-numbered)
        for name in ("src", "dst", "w", "kind"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        # and the replay through it is the same
        a, b = replay(m, True), replay(m, True, graph=got)
        assert np.array_equal(a.t, b.t) and np.array_equal(a.bind, b.bind)
