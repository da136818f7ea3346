"""The what-if model held narrow (a worker's memory, docs/scale.md): its delays in 4 bytes
only where every value fits with room for a sum of two, the same predictions either way;
its build lets each wide array go; a graph built a part at a time (``into``) is the whole
graph's edges into that part."""

from __future__ import annotations

import tracemalloc
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph import model
from profplug.analyzers.graph.events import build_graph
from profplug.analyzers.graph.model import _DELAYS, build_model
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif.predict import whatif
from rounds_in_one_process import whatif_in_rounds
from synth.pipeline import PipelineSpec, write


def _timelines(tmp_path: Path, **spec: object) -> list[Timeline]:
    paths, _ = write(PipelineSpec(**spec), tmp_path)
    return load_timelines([str(p) for p in paths], jobs=1, progress=False)


def _figures(tls: list[Timeline]) -> list[tuple[float, ...]]:
    one, parts = whatif(tls), whatif_in_rounds(tls)
    return [(r.recorded_us, r.replayed_us, r.predicted_us, r.direct_us, q.predicted_us)
            for r, q in zip(one.ranks, parts.ranks, strict=True)]


def test_delays_are_narrowed_where_they_fit_and_predict_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a 4-stage pipeline (delays of microseconds)
    tls = _timelines(tmp_path, stages=4, steps=5)
    m = build_model(tls)
    # then every delay is held in 4 bytes ...
    assert {k: getattr(m, k).dtype for k in _DELAYS} == dict.fromkeys(_DELAYS, np.int32)
    narrow = _figures(tls)
    # ... and the predictions are those of the model held in 8 bytes
    monkeypatch.setattr(model, "_DELAY_MAX", 0)
    assert all(getattr(build_model(tls), k).dtype == np.int64 for k in _DELAYS)
    assert _figures(tls) == narrow
    # and a bound between the arrays' ranges narrows some, not others: still the same
    wide = build_model(tls)
    tops = sorted(int(np.abs(getattr(wide, k)).max()) for k in _DELAYS)
    monkeypatch.setattr(model, "_DELAY_MAX", tops[len(tops) // 2])
    mixed = {getattr(build_model(tls), k).dtype for k in _DELAYS}
    assert mixed == {np.dtype(np.int32), np.dtype(np.int64)}
    assert _figures(tls) == narrow


def test_a_host_gap_over_a_second_keeps_its_delays_in_8_bytes(tmp_path: Path) -> None:
    # given ranks whose host work after each transfer is 1.5 s (over the 2^30 ns bound)
    tls = _timelines(tmp_path / "long", stages=2, steps=3, host_us=1_500_000.0)
    m = build_model(tls)
    # then the host gaps stay int64 (a sum of two could overflow int32) ...
    assert m.a_gap.dtype == np.int64 and int(m.a_gap.max()) >= 2**30
    # ... and the what-if still reads them as recorded: the replay reproduces the run
    res = whatif(tls)
    assert all(abs(r.model_error_pct) < 0.5 for r in res.ranks)


def test_narrowing_frees_each_wide_array(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # given timelines already read, and the model's narrowing watched
    tls = _timelines(tmp_path, stages=1, steps=40, layers=40)
    seen: list[tuple[int, int]] = []
    narrowed = model._narrowed

    def watched(m: model.Model) -> model.Model:
        before = tracemalloc.get_traced_memory()[0]
        out = narrowed(m)
        seen.append((before, tracemalloc.get_traced_memory()[0]))
        return out

    monkeypatch.setattr(model, "_narrowed", watched)
    tracemalloc.start()
    try:
        m = build_model(tls)
    finally:
        tracemalloc.stop()
    # then the narrow copies take less than the wide arrays they replace gave back: no
    # rank's part (nor a name left over from the build's loops) holds a wide array then
    (before, after), = seen
    wide = sum(getattr(m, k).nbytes for k in _DELAYS) * 2  # what narrowing gave back
    assert before - after > wide // 2


def test_a_graph_built_a_part_at_a_time_is_the_whole_graph(tmp_path: Path) -> None:
    # given a pipeline's model and its whole graph
    m = build_model(_timelines(tmp_path, stages=3, steps=4))
    g = build_graph(m, drop=False)
    n_a, n_o = int(m.a_start.size), int(m.o_start.size)
    cuts = (0, n_a, 2 * n_a, 2 * n_a + n_o, 2 * n_a + 2 * n_o)
    total = 0
    for lo, hi in pairwise(cuts):
        # when only the edges into one kind of node are built
        part = build_graph(m, drop=False, into=(lo, hi))
        inside = (g.dst >= lo) & (g.dst < hi)
        # then they are the whole graph's edges into those nodes, in the same order
        for col in ("src", "dst", "w", "kind"):
            assert np.array_equal(getattr(part, col), getattr(g, col)[inside]), col
        total += part.dst.size
    assert total == g.dst.size
