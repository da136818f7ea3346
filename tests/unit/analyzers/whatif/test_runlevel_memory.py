"""What the client lets go of during the run-level analyses changes no answer: the what-if's
model in narrower arrays (the same values in less memory), without its graph inputs
(``model.replay_only``), its replays without their graphs (``simulate.times_only``), the
fixed-point check a block of edges at a time, and the critical path's graph built from a
model without the arrays it never reads (docs/scale.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.lib.array_utils import byte_bounds
from profplug.analyzers.graph import model, pathgraph
from profplug.analyzers.graph.events import RUN, build_graph, dropped_graph
from profplug.analyzers.graph.model import DROP_NONE, DropSpec, Model, build_model, replay_only
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import fixedpoint
from profplug.analyzers.whatif.simulate import _recorded_times, replay, times_only
from synth.pipeline import PipelineSpec, write


def _timelines(tmp_path: Path):
    paths, _ = write(PipelineSpec(stages=4, steps=6, layers=5), tmp_path)
    return load_timelines([str(p) for p in paths], jobs=1, progress=False)


def test_the_drop_replay_of_the_slim_model_on_its_prebuilt_graph_is_the_full_ones(
        tmp_path: Path) -> None:
    m = build_model(_timelines(tmp_path))
    full = replay(m, drop=True)
    slim = replay_only(m)
    # the graph inputs are gone (empty), the rest is the same object
    assert slim.a_gap.size == 0 and slim.o_lat.size == 0 and slim.wait_call.size == 0
    assert slim.a_start is m.a_start and slim.o_order is m.o_order and m.a_gap.size > 0
    got = replay(slim, True, graph=dropped_graph(build_graph(m, drop=False), m))
    for a, b in ((got.a_start, full.a_start), (got.a_end, full.a_end),
                 (got.o_start, full.o_start), (got.o_end, full.o_end), (got.t, full.t),
                 (got.bind, full.bind)):
        assert np.array_equal(a, b)
    kept = times_only(got)
    assert kept.graph.src.size == 0 and np.array_equal(kept.o_end, full.o_end)
    with pytest.raises(RuntimeError, match="let go"):
        _ = kept.bind


def _held(a: np.ndarray) -> int:
    """Bytes of memory the array spans (a broadcast of one number: that number's)."""
    lo, hi = byte_bounds(a)
    return hi - lo if a.size else 0


def _arrays(m: Model) -> dict[str, np.ndarray]:
    out = {k: v for k, v in vars(m).items() if isinstance(v, np.ndarray)}
    return out | {f"threads[{i}]": t for i, t in enumerate(m.threads)}


def test_the_model_holds_the_same_values_in_less_memory(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # given a 4-rank run's model, and the same model left as built (every array 8 bytes an
    # element, docs/scale.md's "narrowed" step skipped)
    tls = _timelines(tmp_path)
    m = build_model(tls)
    with monkeypatch.context() as p:
        p.setattr(model, "_narrowed", lambda x: x)
        wide = build_model(tls)
    narrow, full = _arrays(m), _arrays(wide)
    # then every array holds the same values, in at most 2/3 of the memory (all but the
    # absolute times and the rank columns in 4 bytes: 62% on this run)
    assert narrow.keys() == full.keys()
    for k, a in narrow.items():
        assert np.array_equal(a, full[k]), k
    assert sum(map(_held, narrow.values())) <= 2 / 3 * sum(map(_held, full.values()))
    # and one rank's model holds its rank column in one number, read at every op and call
    one = build_model(tls[:1])
    for col, n in ((one.o_rank, one.o_start.size), (one.a_rank, one.a_start.size)):
        assert col.size == n > 1 and set(col.tolist()) == {tls[0].rank}
        assert _held(col) == col.itemsize


@pytest.mark.parametrize("chunk", [1, 7, 1 << 18])
def test_the_fixed_point_check_by_blocks_of_edges_is_the_whole_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    m = build_model(_timelines(tmp_path))
    g = build_graph(m, drop=False)
    rec = _recorded_times(m)
    monkeypatch.setattr(fixedpoint, "_CHUNK", chunk)
    got = fixedpoint.recorded_fixed_point(g, rec)
    assert got is not None  # the recorded run solves this pipeline's graph
    assert np.array_equal(got[0], np.where(got[0] == fixedpoint.MIN_NS, got[0], rec))
    # an op's run edge doubled back (end -> start, a weight that never binds): the times
    # still solve the equations, and the cycle is found whatever the block size
    k = int(np.nonzero((g.kind == RUN) & (rec[g.dst] > rec[g.src]))[0][0])
    cyc = type(g)(g.n_a, g.n_o, np.append(g.src, g.dst[k]), np.append(g.dst, g.src[k]),
                  np.append(g.w, -(2**40)), np.append(g.kind, RUN))
    assert fixedpoint.recorded_fixed_point(cyc, rec) is None


def test_the_critical_paths_graph_does_not_read_what_it_lets_go(tmp_path: Path) -> None:
    md = build_model(_timelines(tmp_path), DropSpec(kinds=DROP_NONE))
    before = build_graph(md, drop=False)
    pathgraph._unneeded_by_graph(md)
    assert md.a_rank.size == 0 and md.o_order.size == 0 and not md.threads
    after = build_graph(md, drop=False)
    for a, b in ((before.src, after.src), (before.dst, after.dst), (before.w, after.w),
                 (before.kind, after.kind)):
        assert np.array_equal(a, b)


def test_the_kept_launch_links_go_with_their_timeline(tmp_path: Path) -> None:
    import gc
    from dataclasses import replace

    from profplug.analyzers.core import timeline
    from profplug.analyzers.core.memo import Memo

    tl = _timelines(tmp_path)[0]
    memo = Memo()
    first = timeline.launch_calls(tl, memo)
    assert timeline.launch_calls(tl, memo) is first  # kept: computed once
    # a copy of it (as the what-if's predicted timelines, one per rank) is kept while
    # it lives, and its entry goes with it
    other = replace(tl, gpu_start_ns=tl.gpu_start_ns + 1)
    assert np.array_equal(timeline.launch_calls(other, memo), first)
    assert len(memo._entries) == 2
    del other
    gc.collect()
    assert len(memo._entries) == 1 and timeline.launch_calls(tl, memo) is first


def test_the_binding_closure_finds_the_folds_in_edges_again(tmp_path: Path) -> None:
    from profplug.analyzers.whatif.visited import _fold, _single_in_edges

    m = build_model(_timelines(tmp_path))
    g = build_graph(m, drop=True)
    _, _, one = _fold(g, m.threads)
    # what the pass's lazy binding closure recomputes instead of holding: the fold's own
    # single-predecessor in-edges
    assert one.size > 0 and np.array_equal(_single_in_edges(g), one)
