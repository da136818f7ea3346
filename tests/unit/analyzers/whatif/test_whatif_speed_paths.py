"""The what-if's third speed round's shortcuts give the answers of the paths they skip:
the predicted run's stall analysis with the model's nesting and launches (``model_links.replayed_links``)
and with its own; the step statistic's plain-list path and the array path; the dropped graph
cut by blocks and by mask; the steps' reductions by reduceat/bincount and the .at ones."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core import classify
from profplug.analyzers.core.timeline import Timeline, launch_times, launch_tops
from profplug.analyzers.graph import pairs
from profplug.analyzers.graph.coupling import couple, couple_two
from profplug.analyzers.graph.events import Graph, build_graph, dropped_graph
from profplug.analyzers.graph.model import Model, build_model
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls import per_step
from profplug.analyzers.stalls.rank import analyze_rank
from profplug.analyzers.steps import stats
from profplug.analyzers.whatif.model_links import replayed_links
from profplug.analyzers.whatif.predicted_timeline import kept_calls, predicted_timeline
from profplug.analyzers.whatif.simulate import Replay, replay
from synth import KinetoTrace, nested
from synth.pipeline import PipelineSpec, write


def _nested(tmp_path: Path) -> list[Timeline]:
    k = KinetoTrace(rank=0)
    nested(k)
    return [read_kineto(k.write(tmp_path / "nested.json"), 0)]


def _pipeline(tmp_path: Path) -> list[Timeline]:
    paths, _ = write(PipelineSpec(stages=3, steps=6, layers=4), tmp_path)
    return load_timelines([str(p) for p in paths], jobs=1, progress=False)


def _predicted(tl: Timeline, m: Model, drp: Replay) -> tuple[Timeline, np.ndarray]:
    keep = kept_calls(m, tl.rank)
    return predicted_timeline(tl, m, drp, keep), keep


@pytest.mark.parametrize("run", [_nested, _pipeline])
def test_the_predicted_runs_links_are_what_its_own_analysis_finds(tmp_path: Path, run) -> None:
    # given a replay without the synchronizes (calls nested in others; a 3-stage pipeline)
    tls = run(tmp_path)
    m = build_model(tls)
    drp = replay(m, True)
    for tl in tls:
        ptl, keep = _predicted(tl, m, drp)
        links = replayed_links(m, drp, tl.rank, keep)
        # then the replay kept the nesting: the model's kinds and launches are taken ...
        assert links is not None
        kinds, launch = links
        # ... and they are those that the predicted timeline's own nesting column and
        # correlation lookup give
        own = classify.top_level_kinds(classify.kinds_for_symbols(ptl.names)[ptl.api_name],
                                       ptl.api_tops())
        assert np.array_equal(kinds, own)
        assert np.array_equal(launch, launch_times(ptl, launch_tops(ptl)))
        fast = analyze_rank(ptl, brief=True, api_kind=kinds, launch=launch)
        slow = analyze_rank(replace(ptl, api_top=np.zeros(0, dtype=np.int64)), brief=True)
        for a, b in zip(vars(fast.gaps).values(), vars(slow.gaps).values(), strict=True):
            assert np.array_equal(a, b)
        assert fast.steps == slow.steps and fast.devices == slow.devices
        assert np.array_equal(fast.step_last_ns, slow.step_last_ns)


def test_a_nested_call_pushed_to_its_top_level_calls_end_is_not_taken_as_nested(
        tmp_path: Path) -> None:
    # given the nested trace's replay, with a nested driver call moved to start where its
    # top-level call ends (top_level would then find it top-level)
    tls = _nested(tmp_path)
    m = build_model(tls)
    drp = replay(m, True)
    c = int(np.nonzero(m.a_top != np.arange(m.a_top.size))[0][0])
    t = int(m.a_top[c])
    a_s = drp.a_start.copy()
    a_s[c] = drp.a_end[t]
    moved = replace(drp, a_start=a_s)
    # then the shortcut is refused: the predicted run's analysis finds its own nesting
    assert replayed_links(m, moved, 0, ~m.a_dropped[m.a_top]) is None


def test_the_step_statistic_from_lists_is_the_array_paths() -> None:
    # a known series: 8 steps of 10 us and one of 100 us (an outlier)
    s = stats.summarize([10.0] * 8 + [100.0])
    assert (s.value, s.mean, s.n, s.outliers) == (10.0, 20.0, 9, [8])
    # fewer than MIN_STEPS: no outlier; even count: the mean of the two middle values
    assert stats.summarize([4.0, 1.0, 3.0, 2.0]) == stats.StepSummary(2.5, 2.5, 4, [])
    # every length up to SMALL, odd shapes included, against the array path
    rng = np.random.default_rng(7)
    for n in range(1, stats.SMALL + 1):
        for x in (rng.normal(100.0, 5.0, n), np.round(rng.normal(50.0, 1.0, n), 1),
                  np.where(rng.random(n) < 0.2, 500.0, 50.0), np.zeros(n)):
            out = stats.outlier_mask(x)
            ref = stats.StepSummary(stats.center(x, ~out), float(x.mean()), n,
                                        np.flatnonzero(out).tolist())
            assert stats._summarize_list(x) == ref
            assert stats.median(x) == float(np.median(x))
    # a nan: the array path's answer (nan)
    assert np.isnan(stats.median([1.0, np.nan, 2.0]))
    assert np.isnan(stats.summarize([1.0, np.nan, 2.0]).value)


def test_the_dropped_graph_cut_by_blocks_is_the_one_cut_by_mask(tmp_path: Path) -> None:
    m = build_model(_pipeline(tmp_path))
    g = build_graph(m, False)
    assert g.span(0) is None and g.span(3) is not None  # anchors: two blocks; sync: one
    by_block = dropped_graph(g, m)
    by_mask = dropped_graph(Graph(g.n_a, g.n_o, g.src, g.dst, g.w, g.kind), m)
    for name in ("src", "dst", "w", "kind"):
        assert np.array_equal(getattr(by_block, name), getattr(by_mask, name))
    # the blocks still name the edges of their kind
    for k, lo, hi in by_block.parts:
        assert (by_block.kind[lo:hi] == k).all()
    assert sum(hi - lo for _, lo, hi in by_block.parts) == by_block.src.size


def test_the_steps_reductions_are_the_unbuffered_ones() -> None:
    # given per-op step keys in order (the usual), out of order, and empty, with values ...
    rng = np.random.default_rng(7)
    for key in (np.sort(rng.integers(0, 9, 3000)), rng.integers(0, 9, 3000),
                np.zeros(0, dtype=np.int64), np.full(5, 3)):
        lo, hi = rng.integers(-10**12, 10**12, (2, key.size))
        first = np.full(10, per_step.I64_MAX, dtype=np.int64)
        last = np.full(10, per_step.I64_MIN, dtype=np.int64)
        first[2], last[2] = 5, -5  # a value there before
        f2, l2 = first.copy(), last.copy()
        np.minimum.at(f2, key, lo)
        np.maximum.at(l2, key, hi)
        per_step._extrema_at(first, last, key, lo, hi)
        # then the first/last per key are np.minimum.at's and np.maximum.at's
        assert np.array_equal(first, f2) and np.array_equal(last, l2)
        # and the sums per key np.add.at's: by bincount, and past 2^52 ns by add.at
        for vals in (hi, hi * 4096):
            want = np.zeros(10, dtype=np.int64)
            np.add.at(want, key, vals)
            got = per_step._sum_at(key, vals, 10)
            assert got.dtype == np.int64 and np.array_equal(got, want)


def test_the_per_step_periods_in_us_are_the_rounded_ones(tmp_path: Path) -> None:
    # given a pipeline's stage and its periods in whole ns, up to 2^41 ns
    paths, _ = write(PipelineSpec(stages=2, steps=6, layers=3), tmp_path)
    tl = load_timelines([str(paths[0])], jobs=1, progress=False)[0]
    st = analyze_rank(tl).steps
    assert st is not None and len(st.period_us_per_step) == 5
    sp = per_step.step_spans(tl)
    period = np.diff(sp.span_s).astype(np.float64)
    # then each is round(period / 1000, 3), as it was computed
    assert st.period_us_per_step == [round(x / 1000.0, 3) for x in period.tolist()]
    big = np.random.default_rng(3).integers(0, 2 ** 41, 100_000).astype(np.float64)
    assert (big / 1000.0).tolist() == [round(x / 1000.0, 3) for x in big.tolist()]


def test_two_ranks_kernels_coupled_at_once_as_one_pair_at_a_time() -> None:
    ka, kb = [3, 7, 9], [4, 8, 11]
    edges: list[tuple[int, int, int, int, int, int]] = []
    for i, j in zip(ka, kb, strict=True):
        couple([(0, i), (1, j)], 6, edges)
    assert couple_two(0, 1, ka, kb, 6) == edges and len(edges) == 6


def test_a_run_without_nccl_kernels_is_not_matched(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # given a rank with no NCCL kernel: the matching would find no pair and warn of nothing
    def no_match(*_: object) -> None:
        raise AssertionError("matched a run without NCCL kernels")

    monkeypatch.setattr(pairs, "match", no_match)
    m = build_model(_nested(tmp_path))
    assert m.o_start.size and (m.o_peer == -1).all() and (m.o_clock == 0).all()
