"""The HTML timeline draws GPU time by quantity, as the page's other figures do: NCCL time
as comm (transfer where the cross-rank analysis split it) and NCCL peer wait in its own
colour, never inside one "busy" colour (synthetic 4-stage pipeline with exact answers; us)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers import analyze, cross_rank_analysis
from profplug.analyzers.render.timeline_data import timeline_data
from profplug.analyzers.stalls.intervals import difference
from synth.pipeline import PipelineSpec, write

SPEC = PipelineSpec(stages=4, steps=5, sync="device", slow_stage=2)


def _per_row(d: dict[str, list[float]], n_rows: int) -> list[float]:
    out = [0.0] * n_rows
    for s, e, y in zip(d["s"], d["e"], d["y"], strict=True):
        out[y] += e - s
    return out


def test_peer_wait_and_transfer_spans_are_the_exact_ones(tmp_path: Path) -> None:
    # given a 4-stage pipeline whose ranks' NCCL waits and transfers are known
    _, truth = write(SPEC, tmp_path / "run")
    rep = analyze([tmp_path / "run"], run=[cross_rank_analysis()])
    # when the page's timeline data is built
    tl, notes = timeline_data([("", rep)])
    # then it draws compute, NCCL transfer and NCCL peer wait (the bars' and swimlane's
    # quantities), with the exact NCCL time and peer wait of every rank
    assert notes == [] and tl["parts"] == ["compute", "transfer", "peer_wait"]
    comm = _per_row(tl["spans"]["comm"], len(tl["rows"]))
    wait = _per_row(tl["spans"]["peer_wait"], len(tl["rows"]))
    assert comm == pytest.approx([t.wait_us + t.transfer_us for t in truth], abs=1e-3)
    assert wait == pytest.approx([t.wait_us for t in truth], abs=1e-3)
    assert any(w > 0 for w in wait)
    # and each peer wait lies inside the row's NCCL time, which lies inside its busy time
    for inner, outer in (("peer_wait", "comm"), ("comm", "busy")):
        d_in = tl["spans"][inner]
        d_out = tl["spans"][outer] if outer != "busy" else tl["busy"]
        for s, e, y in zip(d_in["s"], d_in["e"], d_in["y"], strict=True):
            assert any(yy == y and ss <= s + 1e-3 and e <= ee + 1e-3 for ss, ee, yy in
                       zip(d_out["s"], d_out["e"], d_out["y"], strict=True)), (inner, s, e)


def test_without_the_cross_rank_analysis_nccl_time_is_comm(tmp_path: Path) -> None:
    _, truth = write(SPEC, tmp_path / "run")
    tl, _ = timeline_data([("", analyze([tmp_path / "run"]))])
    assert tl["parts"] == ["compute", "comm"] and tl["spans"]["peer_wait"]["s"] == []
    comm = _per_row(tl["spans"]["comm"], len(tl["rows"]))
    assert comm == pytest.approx([t.wait_us + t.transfer_us for t in truth], abs=1e-3)


def test_a_page_with_split_and_unsplit_runs_names_both(tmp_path: Path) -> None:
    # given a compare page's two runs, one with the cross-rank analysis and one without
    write(SPEC, tmp_path / "run")
    split = analyze([tmp_path / "run"], run=[cross_rank_analysis()])
    tl, _ = timeline_data([("A", split), ("B", analyze([tmp_path / "run"]))])
    # then the legend names NCCL time that was not split (comm) and the split parts
    assert tl["parts"] == ["compute", "comm", "transfer", "peer_wait"]


def test_spans_past_the_cap_are_left_out_with_a_note(tmp_path: Path) -> None:
    write(SPEC, tmp_path / "run")
    rep = analyze([tmp_path / "run"], run=[cross_rank_analysis()])
    tl, notes = timeline_data([("", rep)], max_gaps=6)  # spans: half the gaps' budget each
    rows = len(tl["rows"])
    assert all(n <= 3 for n in np.bincount(tl["spans"]["comm"]["y"], minlength=rows))
    assert any(": drew the 3 longest of 10 comm spans; the other 7 (" in n and
               n.endswith("are drawn as compute") for n in notes), notes


def test_difference_of_disjoint_intervals() -> None:
    a_s, a_e = np.array([0, 10, 30]), np.array([5, 20, 40])
    b_s, b_e = np.array([2, 12, 30]), np.array([4, 25, 40])
    s, e = difference(a_s, a_e, b_s, b_e)
    assert s.tolist() == [0, 4, 10] and e.tolist() == [2, 5, 12]
    s, e = difference(a_s, a_e, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert s.tolist() == [0, 10, 30] and e.tolist() == [5, 20, 40]
