"""``whatif RUN --against OTHER`` (``whatif/against.py``): the prediction lined up with a
measured run by call and step, per rank.

The synthetic pair follows the model's own rules (``synth.pipeline``), so the device run's
dropped replay is the event run but for one thing worked out by hand: a send/recv range ends
1 us before the host is free (``h - 1``), the host is free ``host_us`` = 10 us after the
call's last API call, and that is the device run's ``cudaDeviceSynchronize`` at ``h0 + 8``
(dropped with nothing of its own: free at ``h0 + 18``, the range 17 us) or the event run's
1 us ``cudaEventRecord`` at ``h0 + 8`` (free at ``h0 + 19``, the range 18 us): every "in"
segment is 1 us shorter in the prediction, every other one equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import whatif
from profplug.analyzers.whatif.against import AgainstResult, against, call_name
from synth.pipeline import PipelineSpec, write

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ROOT = Path(__file__).resolve().parents[4]
SEND, RECV = "send_to_next_pipeline_rank", "recv_from_prev_pipeline_rank_"
WHERE = [f"before {RECV}", f"in {RECV}", f"after {RECV} (until {SEND})", f"in {SEND}",
         f"after {SEND}"]


def _pair(tmp_path: Path, after_send_us: float = 0.0, stages: int = 2) -> tuple[Path, Path]:
    dev, evt = tmp_path / "device", tmp_path / "event"
    write(PipelineSpec(stages=2, steps=8, sync="device"), dev)
    write(PipelineSpec(stages=stages, steps=8, sync="event", after_send_us=after_send_us), evt)
    return dev, evt


def _against(dev: Path, evt: Path) -> AgainstResult:
    ta, tb = load_timelines([dev]), load_timelines([evt])
    return against(whatif(ta), ta, tb, "event")


def test_the_replayed_device_run_is_the_event_run(tmp_path: Path) -> None:
    # given a device run and the event run of the same pipeline (the model's rules)
    res = _against(*_pair(tmp_path))
    # then both ranks line up call by call: 1 us less in each call (module docstring), 0
    # elsewhere; the same step (180 us: 2 x 4 x 20 us of kernels + 2 x 10 us transfers)
    assert [r.rank for r in res.ranks] == [0, 1] and res.warnings == []
    for r in res.ranks:
        assert [s.where(r.repeated) for s in r.segments] == WHERE
        assert [s.diff_us for s in r.segments] == [0.0, -1.0, 0.0, -1.0, 0.0]
        assert (r.predicted_us, r.measured_us, r.error_pct, r.inside) == (180.0, 180.0,
                                                                          0.0, True)
        assert r.n_steps >= 5


def test_a_slower_host_after_the_send_is_named_with_its_amount(tmp_path: Path) -> None:
    # given an event run whose rank 0 does 300 us more host work after each send
    res = _against(*_pair(tmp_path, after_send_us=300.0))
    r0, r1 = res.ranks
    # then rank 0's finding is that segment, by that amount; rank 1 is as before
    assert r0.top(1)[0].where() == f"after {SEND}" and r0.top(1)[0].diff_us == -300.0
    assert r0.finding() == (f"rank 0, after {SEND}: predicted the host free 300 us earlier "
                            "than it was (1 predicted vs 301 us measured per step)")
    # rank 0's step is host-bound: 358 us measured (58 us of host work + the 300), outside
    # the prediction's band
    assert (r0.measured_us, r0.inside) == (358.0, False)
    assert max(abs(s.diff_us) for s in r1.segments) == 1.0


def test_other_ranks_warn_and_compare_the_common_ones(tmp_path: Path) -> None:
    res = _against(*_pair(tmp_path, stages=3))
    assert [r.rank for r in res.ranks] == [0, 1]
    assert res.warnings[0] == ("event has ranks [0, 1, 2], the what-if [0, 1]: compared "
                               "ranks [0, 1]")


def test_pipeline_names_are_anchors_and_synchronize_ranges_are_not() -> None:
    assert call_name("profplug.send_to_next_pipeline_rank peer=1") == SEND
    assert call_name("profplug.broadcast_from_last_pipeline_stage root=1 group=0,1") == (
        "broadcast_from_last_pipeline_stage")
    assert call_name("megatron.core.inference.communication_utils."
                     "recv_from_prev_pipeline_rank_") == RECV
    assert call_name("profplug.synchronize a.py:3 send_to_next_pipeline_rank") is None
    assert call_name("profplug.sync.device") is None


def test_cli_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dev, evt = _pair(tmp_path, after_send_us=300.0)
    assert main(["whatif", str(dev), "--against", str(evt)]) == 0
    out = capsys.readouterr().out
    assert out.index("profplug what-if") < out.index("against event (measured)")
    assert f"rank 0, after {SEND}: predicted the host free 300 us earlier" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert main(["whatif", str(dev), "--against", str(evt), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["whatif", "against"]
    r0 = doc["against"]["ranks"][0]
    assert (r0["rank"], r0["measured_us"], r0["inside"]) == (0, 358.0, False)
    assert [s["where"] for s in r0["segments"]] == WHERE


def test_compare_prints_the_top_segments(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    dev, evt = _pair(tmp_path, after_send_us=300.0)
    assert main(["compare", str(dev), str(evt)]) == 0
    out = capsys.readouterr().out
    assert "segment (top 3)" in out and f"rank 0, after {SEND}" in out
    assert main(["compare", str(dev), str(evt), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["against"]["ranks"][0]["finding"].startswith(
        f"rank 0, after {SEND}")


@pytest.mark.parametrize("other, says", [
    ("missing", "--against: {p}: no such file or directory"),
    ("notes.txt", "{p}: unknown trace format"),
    ("abdir", "--against {p}: a profplug ab directory; --against needs a traced run"),
])
def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 other: str, says: str) -> None:
    dev, _ = _pair(tmp_path)
    (tmp_path / "notes.txt").write_text("not a trace\n")
    (tmp_path / "abdir").mkdir()
    (tmp_path / "abdir" / "ab.json").write_text("{}")
    p = tmp_path / other
    assert main(["whatif", str(dev), "--against", str(p)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("profplug: error: ")
    assert says.format(p=p) in err


def test_sample_pp2_infer_kineto(capsys: pytest.CaptureFixture[str]) -> None:
    run = ROOT / "sample_traces" / "pp2_infer_kineto"
    assert main(["whatif", str(run / "device"), "--against", str(run / "event"),
                 "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)["against"]
    assert doc["measured"] == "event" and doc["warnings"] == []
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    for r in doc["ranks"]:
        wheres = [s["where"] for s in r["segments"]]
        assert f"in {SEND}" in wheres and f"in {RECV}" in wheres
        assert r["finding"].startswith(f"rank {r['rank']}, ")
        assert r["n_steps"] >= 15 and r["measured_us"] > 0 and r["predicted_us"] > 0
