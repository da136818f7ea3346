"""The replay's fast paths give the node-by-node pass's answer exactly: runs of ops solved in
closed form (``streamruns``), the host chains folded by a prefix sum, and the replay as
recorded taken from the recorded times when they are checked to be its answer
(``fixedpoint``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import profplug.analyzers.graph.longest_path
import pytest
from profplug.analyzers.graph.events import ANCHOR, CALL, LAUNCH, PEER, RUN, Graph, build_graph
from profplug.analyzers.graph.model import build_model
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import fixedpoint, simulate, streamruns, visited
from profplug.analyzers.whatif.fixedpoint import recorded_fixed_point
from profplug.analyzers.whatif.simulate import _recorded_times, longest_path, replay
from profplug.analyzers.whatif.streamruns import stream_runs
from profplug.analyzers.whatif.visited import _fold
from synth.pipeline import PipelineSpec, write


def _pipeline(tmp_path: Path):
    paths, _ = write(PipelineSpec(stages=4, steps=6, layers=5), tmp_path)
    return build_model(load_timelines([str(p) for p in paths], jobs=1, progress=False))


def test_closed_form_runs_give_the_node_by_node_times(tmp_path: Path) -> None:
    # given a 4-stage pipeline whose stages launch runs of layers from one stretch of host
    m = _pipeline(tmp_path)
    for drop in (False, True):
        g = build_graph(m, drop)
        root, off, _ = _fold(g, m.threads)
        # then most op starts are solved in closed form, the same from the stream order as
        # along the stream edges ...
        linked, ordered = stream_runs(g, root, off), stream_runs(g, root, off, m.o_order)
        assert linked.node.size >= m.o_start.size // 2
        ia, ib = np.argsort(linked.node), np.argsort(ordered.node)
        for a, b in zip(vars(linked).values(), vars(ordered).values(), strict=True):
            assert np.array_equal(a[ia], b[ib])
        # ... and every node's time and binding edge are the node-by-node pass's
        fast, plain = longest_path(g, m), longest_path(g, m, runs=False)
        assert np.array_equal(fast[0], plain[0]) and np.array_equal(fast[1], plain[1])
        # the host fold equals plain pointer jumping
        r2, o2, _ = _fold(g)
        assert np.array_equal(root, r2) and np.array_equal(off, o2)


@pytest.mark.parametrize("chunk", [2, 6, 64])
def test_the_host_fold_a_piece_at_a_time_is_the_whole_fold(tmp_path: Path, chunk: int,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    # given threads folded a few nodes at a time (the open segment carried across pieces)
    m = _pipeline(tmp_path)
    assert max(t.size for t in m.threads) * 2 > chunk
    for drop in (False, True):
        g = build_graph(m, drop)
        whole = _fold(g, m.threads)
        monkeypatch.setattr(visited, "_CHUNK", chunk)
        pieces = _fold(g, m.threads)
        monkeypatch.undo()
        # then every root and offset is the one-piece fold's, and pointer jumping's
        plain = _fold(g)
        for a, b, c in zip(whole[:2], pieces[:2], plain[:2], strict=True):
            assert np.array_equal(a, b) and np.array_equal(a, c)
        # and the replay through it is the node-by-node pass's
        monkeypatch.setattr(visited, "_CHUNK", chunk)
        monkeypatch.setattr(simulate, "_CHUNK", chunk)
        fast = longest_path(g, m)
        monkeypatch.undo()
        node = longest_path(g, m, runs=False)
        assert np.array_equal(fast[0], node[0]) and np.array_equal(fast[1], node[1])


def test_runs_far_from_time_zero_are_solved_in_one_cummax(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    # given the 4-stage pipeline, its clock at epoch ns (1.76e18, as a real trace's): the
    # runs rooted at the source have raw offsets of that size, the others small ones
    m = _pipeline(tmp_path)
    assert int(m.a_start.min()) > 10 ** 18

    def no_links(*_: object) -> None:
        raise AssertionError("the runs taken along the links (offsets overflowed)")

    for drop in (False, True):
        g = build_graph(m, drop)
        root, off, _ = _fold(g, m.threads)
        plain = longest_path(g, m, runs=False)
        with monkeypatch.context() as mp:
            mp.setattr(streamruns, "jump", no_links)
            # then the stream order's one cummax solves the runs (each from its own lowest
            # value: no stacked offsets of 1.76e18 that overflow int64) ...
            assert stream_runs(g, root, off, m.o_order).node.size >= m.o_start.size // 2
            fast = longest_path(g, m)
        # ... with the node-by-node pass's times and binding edges
        assert np.array_equal(fast[0], plain[0]) and np.array_equal(fast[1], plain[1])


def test_the_replay_as_recorded_is_the_recorded_times_when_they_solve_it(tmp_path: Path
                                                                       ) -> None:
    m = _pipeline(tmp_path)
    g = build_graph(m, drop=False)
    fp = recorded_fixed_point(g, _recorded_times(m))
    assert fp is not None  # the shortcut is taken on this run
    t, bind, forced, _ = longest_path(g, m)
    assert np.array_equal(fp[0], t) and np.array_equal(fp[1], bind) and not forced
    rp = replay(m, drop=False)
    assert np.array_equal(rp.o_start, m.o_start) and np.array_equal(rp.o_end, m.o_end)
    # the replay's binding edges (found on first use) are the pass's, both ways
    assert np.array_equal(rp.bind, bind)
    dp = replay(m, drop=True)
    assert np.array_equal(dp.bind, longest_path(build_graph(m, drop=True), m)[1])


def test_a_zero_weight_cycle_is_left_to_the_pass() -> None:
    # given one call and one op whose call end and op start wait for each other at no cost:
    # the recorded times (10 everywhere) satisfy every equation, but the graph has a cycle
    src = np.array([4, 0, 1, 2, 2])
    dst = np.array([0, 1, 2, 1, 3])
    kind = np.array([ANCHOR, CALL, RUN, RUN, RUN], dtype=np.int8)
    g = Graph(1, 1, src, dst, np.array([10, 0, 0, 0, 0]), kind)
    rec = np.array([10, 10, 10, 10, 0])
    # then the recorded times are not taken as the replay
    assert recorded_fixed_point(g, rec) is None
    # and a time off its equation is not either (without the cycle)
    g2 = Graph(1, 1, src[[0, 1, 2, 4]], dst[[0, 1, 2, 4]], np.array([10, 5, 0, 0]),
               kind[[0, 1, 2, 4]])
    assert recorded_fixed_point(g2, rec) is None
    assert recorded_fixed_point(g2, np.array([10, 15, 15, 15, 0])) is not None


def test_a_cycle_across_a_time_window_is_left_to_the_pass() -> None:
    # given a call and an op 5 ns apart that wait for each other (a peer edge back across
    # clocks): the recorded times (10 and 15) satisfy every equation, but the two nodes and
    # the edges between them lie in the window [10, 15] of the non-rising edge (a small part
    # of the run: the op runs until 100)
    src = np.array([4, 0, 2, 0, 2])  # source -> call start -> op start -> call start
    dst = np.array([0, 2, 0, 1, 3])
    w = np.array([10, 5, -5, 10, 85])
    kind = np.array([ANCHOR, LAUNCH, PEER, CALL, RUN], dtype=np.int8)
    rec = np.array([10, 20, 15, 100, 0])
    # then the recorded times are not taken as the replay
    assert recorded_fixed_point(Graph(1, 1, src, dst, w, kind), rec) is None
    # and without the edge back they are
    keep = [0, 1, 3, 4]
    g = Graph(1, 1, src[keep], dst[keep], w[keep], kind[keep])
    assert recorded_fixed_point(g, rec) is not None


def test_windows_across_much_of_the_run_are_left_to_the_pass(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # given an acyclic graph whose one non-rising edge (the call's end -> the op's start,
    # 5 ns back) opens the window [15, 20], its op running until 100 or until 20
    def graph(run: int) -> tuple[Graph, np.ndarray]:
        g = Graph(1, 1, np.array([4, 0, 1, 0, 2]), np.array([0, 1, 2, 2, 3]),
                  np.array([10, 10, -5, 5, run]),
                  np.array([ANCHOR, CALL, PEER, LAUNCH, RUN], dtype=np.int8))
        return g, np.array([10, 20, 15, 15 + run, 0])

    # then the window test takes the recorded times where the window is a small part of
    # the run, and leaves the run to the pass where it spans more than a quarter of it ...
    assert recorded_fixed_point(*graph(85)) is not None
    assert recorded_fixed_point(*graph(5)) is None
    # ... whose times are the recorded ones all the same
    monkeypatch.setattr(fixedpoint, "MAX_COVER", 1.0)
    got = recorded_fixed_point(*graph(5))
    assert got is not None and got[0].tolist() == [10, 20, 15, 20, 0]
    g, _ = graph(5)
    t = profplug.analyzers.graph.longest_path.longest_path(g.n_nodes, g.src, g.dst, g.w, [g.source])
    assert t is not None and t.tolist() == [10, 20, 15, 20, 0]


def test_a_node_is_numbered_by_its_place_among_the_visited() -> None:
    # given the visited nodes (ascending) and nodes asked about, some not visited
    keys = np.array([2, 5, 9, 40], dtype=np.int64)
    asked = np.array([[9, 2, 3], [40, 41, 0]], dtype=np.int32)
    # then each gets its place, -1 where it is not visited, in the shape asked
    assert visited.numbered(keys, asked).tolist() == [[2, 0, -1], [3, -1, -1]]
    assert visited.numbered(keys[:0], asked).tolist() == [[-1] * 3] * 2
