"""The what-if's one longest-path solver (``graph/longest_path.py``) on graphs whose answers are
known exactly: chains, diamonds, ties, cycles (none solved; one broken the way the replay
breaks it), an empty graph; Kahn's order on lists and level by level give the same times
and the same cycles; chains folded by pointer jumping; the binding edge's rule of ties."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from profplug.analyzers.graph.longest_path import (
    MIN_NS,
    Kahn,
    acyclic,
    first_in_edges,
    jump,
    longest_path,
    longest_path_by_levels,
)

Solver = Callable[[int, np.ndarray, np.ndarray, np.ndarray, list[int]], np.ndarray | None]
SOLVERS = [longest_path, longest_path_by_levels]


def _graph(edges: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.array(edges, dtype=np.int64).reshape(-1, 3)
    return a[:, 0], a[:, 1], a[:, 2]


@pytest.mark.parametrize("solve", SOLVERS)
def test_longest_path_of_a_chain_sums_its_weights(solve: Solver) -> None:
    src, dst, w = _graph([(2, 3, 2), (0, 1, 5), (1, 2, 7)])
    assert solve(4, src, dst, w, [0]).tolist() == [0, 5, 12, 14]


@pytest.mark.parametrize("solve", SOLVERS)
def test_longest_path_of_a_diamond_takes_the_later_branch(solve: Solver) -> None:
    # 0 -> 1 -> 3 arrives at 7, 0 -> 2 -> 3 at 11; negative weights count as they are
    src, dst, w = _graph([(0, 1, 3), (0, 2, 10), (1, 3, 4), (2, 3, 1), (3, 4, -6)])
    assert solve(5, src, dst, w, [0]).tolist() == [0, 3, 10, 11, 5]


@pytest.mark.parametrize("solve", SOLVERS)
def test_longest_path_of_tied_branches_is_their_one_time(solve: Solver) -> None:
    src, dst, w = _graph([(0, 1, 4), (0, 2, 1), (1, 3, 2), (2, 3, 5), (0, 3, 6)])
    assert solve(4, src, dst, w, [0]).tolist() == [0, 4, 1, 6]


@pytest.mark.parametrize("solve", SOLVERS)
def test_longest_path_of_an_empty_graph(solve: Solver) -> None:
    none = np.zeros(0, dtype=np.int64)
    assert solve(0, none, none, none, []).tolist() == []
    # nodes without edges: the sources at 0, the others reached by no path
    assert solve(3, none, none, none, [1]).tolist() == [MIN_NS, 0, MIN_NS]


@pytest.mark.parametrize("solve", SOLVERS)
def test_longest_path_from_a_node_no_path_reaches_stays_far_below(solve: Solver) -> None:
    # node 1 has no in-edge and is no source: what it gives stays near MIN_NS; several
    # sources all start at 0
    src, dst, w = _graph([(1, 2, 5), (0, 3, 2), (4, 3, 9)])
    assert solve(5, src, dst, w, [0, 4]).tolist() == [0, MIN_NS, MIN_NS + 5, 9, 0]


@pytest.mark.parametrize("solve", SOLVERS)
def test_longest_path_of_a_cycle_is_none(solve: Solver) -> None:
    src, dst, w = _graph([(0, 1, 1), (1, 2, 1), (2, 1, 1), (2, 3, 1)])
    assert solve(4, src, dst, w, [0]) is None
    src, dst, w = _graph([(0, 0, 0)])  # a node waiting for itself
    assert solve(1, src, dst, w, [0]) is None


def test_longest_path_stops_at_a_cycle_and_goes_on_once_a_node_is_released() -> None:
    # 0 -> 1 -> 2 -> 1 (a cycle), 2 -> 3: the pass takes node 0 only; node 1 has its time
    # from 0 so far (2) and waits for 2
    src, dst, w = _graph([(0, 1, 2), (1, 2, 3), (2, 1, 1), (2, 3, 4)])
    k = Kahn(4, src, dst, w, [0])
    assert k.run() == 1 and k.t[1] == 2 and k.indeg[1] == 1
    # released as the replay releases a node of a cycle no NCCL pairing explains: it waits
    # no longer; the edge back still relaxes it once its source is timed (6: after its own
    # out-edges, which took 2)
    k.indeg[1] = 0
    k.ready.append(1)
    assert k.run() == 4 and k.t == [0, 6, 5, 9]
    # released as a forced NCCL kernel: the edge back cut (it gives nothing) and no longer
    # waited for
    k = Kahn(4, src, dst, w, [0])
    k.run()
    k.cut(np.array([2]))
    k.indeg[1] -= 1
    k.ready.append(1)
    assert k.run() == 4 and k.t == [0, 2, 5, 9]


def test_longest_path_on_lists_and_by_levels_agree_on_random_graphs() -> None:
    rng = np.random.default_rng(7)
    for k in range(30):
        n = 60
        a, b = rng.integers(0, n, (2, 200 + k))
        s, d = np.minimum(a, b)[a != b], np.maximum(a, b)[a != b]  # a DAG (lower to higher)
        w = rng.integers(-50, 100, s.size)
        sources = [0, int(rng.integers(1, n))]
        lists, levels = longest_path(n, s, d, w, sources), longest_path_by_levels(n, s, d, w,
                                                                                  sources)
        assert lists is not None and levels is not None
        assert np.array_equal(lists, levels)
        # one edge doubled back (its destination to its source): a cycle, found by both
        back_s, back_d = np.append(s, d[k % d.size]), np.append(d, s[k % s.size])
        bw = np.append(w, 0)
        assert longest_path(n, back_s, back_d, bw, sources) is None
        assert longest_path_by_levels(n, back_s, back_d, bw, sources) is None


def test_acyclic_by_levels_and_on_lists_agree() -> None:
    # given random small graphs: DAGs (edges from a lower to a higher node id, a long chain
    # among them) and the same with one back edge (a cycle)
    rng = np.random.default_rng(5)
    for k in range(40):
        a, b = np.sort(rng.choice(200, (2, 30 + k)), axis=0)
        a, b = a[a < b], b[a < b]
        chain = np.arange(100, 160)
        src, dst = np.concatenate([a, chain[:-1]]), np.concatenate([b, chain[1:]])
        back_src, back_dst = np.append(src, dst[k % dst.size]), np.append(dst, src[k % src.size])
        for s, d, expected in ((src, dst, True), (back_src, back_dst, False)):
            # then Kahn's order on lists and the level-by-level peel agree: a cycle or none
            assert acyclic(s, d, 200) is expected
            assert acyclic(s, d, 200, budget=10 ** 6, on_lists=0) is expected


def test_acyclic_leaves_a_graph_too_deep_for_its_budget_undecided() -> None:
    chain = np.arange(1000)
    src, dst = chain[:-1], chain[1:]
    # a level peels one edge of a chain: 999 levels, ~500k edges looked at
    assert acyclic(src, dst, 1000, budget=10_000, on_lists=0) is None
    assert acyclic(src, dst, 1000, budget=10 ** 6, on_lists=0) is True
    assert acyclic(src, dst, 1000, budget=0, on_lists=999) is True  # on lists from the start
    assert acyclic(src[:0], dst[:0], 1000) is True


def test_jump_sums_and_maxes_along_chains_and_finds_their_first_node() -> None:
    # two chains by their previous element (-1: the first): 0 <- 1 <- 2 <- 3 and 4 <- 5
    prev = np.array([-1, 0, 1, 2, -1, 4])
    total = np.array([1, 2, 3, 4, 10, 20])
    top = np.array([5, 1, 7, 2, 3, 1])
    first = np.arange(6)
    jump(prev.copy(), np.flatnonzero(prev >= 0), lambda p: p >= 0,
         [(total, np.add), (top, np.maximum), (first, lambda _a, b: b)])
    assert total.tolist() == [1, 3, 6, 10, 10, 30]
    assert top.tolist() == [5, 5, 7, 7, 3, 3]
    assert first.tolist() == [0, 0, 0, 0, 4, 4]


def test_jump_follows_a_chain_to_its_first_node_in_place() -> None:
    # each node points at its predecessor while ``on`` (a node off it is a chain's first)
    par = np.array([0, 0, 1, 2, 4, 4, 5], dtype=np.int32)
    on = np.array([False, True, True, True, False, True, True])
    left = jump(par, np.flatnonzero(on & on[par]), lambda p: on[p])
    assert par.tolist() == [0, 0, 0, 0, 4, 4, 4] and left.size == 0
    # a loop never reaches a first node: its nodes are left after the rounds allowed
    loop = np.array([1, 2, 0])
    assert jump(loop, np.arange(3), lambda p: p >= 0, rounds=5).tolist() == [0, 1, 2]


def test_first_in_edges_breaks_ties_by_the_keys_then_by_position() -> None:
    dst = np.array([2, 0, 2, 2, 0])
    # no keys: each node's lowest position, nodes in order (0, then 2)
    assert first_in_edges(dst).tolist() == [1, 0]
    # the latest value first (its negation ascending); a tie by position
    val = np.array([5, 1, 7, 7, 1])
    assert first_in_edges(dst, (-val,)).tolist() == [1, 2]
    # a second key under the first: the lower priority wins the tie of 7s
    prio = np.array([0, 0, 1, 0, 0])
    assert first_in_edges(dst, (prio, -val)).tolist() == [1, 3]
    assert first_in_edges(dst[:0]).tolist() == []
