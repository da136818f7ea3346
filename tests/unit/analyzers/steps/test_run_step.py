"""Issue 41, items 1, 2, 4: one step per run in every JSON output and page (``runstep``,
docs/costs.md "The run's step"); ``ab-report`` recomputes a stored what-if when its traced
run is at hand, else labels it; ``--unprofiled`` calibrates every rank at one host scale.

On the shipped samples: the two-rank ``pp2_infer_kineto`` (device, event) and the A/B
``ab_h200_decode_loop`` (copied: ab-report --rewrite rewrites ab.json). Times in us.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import whatif, whatif_unprofiled

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ROOT = Path(__file__).resolve().parents[4]
SAMPLES = ROOT / "sample_traces"
DEVICE = SAMPLES / "pp2_infer_kineto" / "device"
EVENT = SAMPLES / "pp2_infer_kineto" / "event"
AB = SAMPLES / "ab_h200_decode_loop"



def _json(args: list[str], out: Path) -> dict:
    assert main([*args, "-f", "json", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_report_step_is_the_slowest_ranks_median_step(tmp_path: Path, capsys) -> None:
    doc = _json(["report", str(DEVICE)], tmp_path / "r.json")
    per = {str(r["rank"]): r["steps"]["period_us"] for r in doc["ranks"]}
    assert doc["step"] == {"statistic": "median", "basis": "step", "us": max(per.values()),
                           "per_rank_us": per}
    assert len(set(per.values())) == 2  # the ranks differ: the max is a choice
    assert main(["report", str(DEVICE)]) == 0
    assert f"the run's step: {doc['step']['us']:,.1f} us/step" in capsys.readouterr().out


def test_whatif_json_carries_the_recorded_and_predicted_step(tmp_path: Path) -> None:
    doc = _json(["whatif", str(DEVICE)], tmp_path / "w.json")
    ranks = doc["whatif"]["ranks"]
    assert doc["step"]["us"] == max(r["recorded_us"] for r in ranks)
    assert doc["predicted_step"]["us"] == max(r["predicted_us"] for r in ranks)
    assert doc["predicted_step"]["per_rank_us"] == {str(r["rank"]): r["predicted_us"]
                                                    for r in ranks}
    assert doc["step"] == doc["whatif"]["step"]
    report = _json(["report", str(DEVICE)], tmp_path / "r.json")
    assert doc["step"] == report["step"]  # one run, one step


def test_compare_measured_is_b_step_and_each_run_has_its_step(tmp_path: Path,
                                                               capsys) -> None:
    doc = _json(["compare", str(DEVICE), str(EVENT)], tmp_path / "c.json")
    for side in ("a", "b"):
        assert doc[side]["step"] == doc[side]["report"]["step"]
    assert doc["answer"]["measured_us"] == doc["b"]["step"]["us"]
    assert f"measured {doc['b']['step']['us']:,.0f} us/step" in doc["answer"]["sentence"]
    assert main(["compare", str(DEVICE), str(EVENT)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (f"the run's step: A {doc['a']['step']['us']:,.1f} us/step" in out
            and f"vs B {doc['b']['step']['us']:,.1f} us/step" in out)


def _ab_copy(tmp_path: Path, run: str | None) -> Path:
    """The A/B sample in tmp_path, its stored what-if naming ``run`` (None: the copy's
    traced_device) and nothing else (no stored ``run_path``)."""
    out = tmp_path / "ab"
    shutil.copytree(AB, out)
    doc = json.loads((out / "ab.json").read_text())
    doc["whatif"]["run"] = str(out / "traced_device") if run is None else run
    doc["whatif"].pop("run_path", None)
    (out / "ab.json").write_text(json.dumps(doc))
    return out


def test_ab_report_json_has_a_step_per_policy(tmp_path: Path) -> None:
    out = _ab_copy(tmp_path, str(tmp_path / "gone"))
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    doc = json.loads((out / "ab.json").read_text())
    for policy, s in doc["summary"].items():
        step = doc["step"][policy]
        assert (step["us"], step["basis"], step["statistic"]) == (
            s["median_step_us"], "unprofiled rounds", "median over rounds")
        assert step["per_rank_us"] == {str(k["rank"]): k["median_step_us"]
                                       for k in s["ranks"]}


def test_ab_report_recomputes_the_stored_whatif_when_its_run_is_at_hand(
        tmp_path: Path, capsys) -> None:
    out = _ab_copy(tmp_path, None)
    stored = json.loads((out / "ab.json").read_text())["whatif"]
    stored["predicted_step_us"] = 11_891.3  # an older version's figure
    doc = json.loads((out / "ab.json").read_text())
    doc["whatif"] = stored
    (out / "ab.json").write_text(json.dumps(doc))
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    w = json.loads((out / "ab.json").read_text())["whatif"]
    assert w["recomputed"] is True
    assert w["predicted_step_us"] != 11_891.3
    assert w["calibrated_on_us"] == doc["summary"]["device"]["median_step_us"]
    assert w["band_pct"] > 0  # the paired speedup CI's half-width added, as ab --whatif
    assert "stored in ab.json" not in capsys.readouterr().out
    assert w["stored_by"].startswith("profplug ")  # what a later ab-report labels it with


def test_ab_report_labels_a_stored_whatif_whose_run_is_gone(tmp_path: Path,
                                                             capsys) -> None:
    gone = str(tmp_path / "no_such_run")
    out = _ab_copy(tmp_path, gone)
    before = json.loads((out / "ab.json").read_text())["whatif"]
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    w = json.loads((out / "ab.json").read_text())["whatif"]
    assert w["recomputed"] is False
    assert w["predicted_step_us"] == before["predicted_step_us"]  # kept as stored
    text = "".join(capsys.readouterr().out.split())  # wrapped lines: also inside the path
    # the sample's ab.json names the version that stored it
    assert "".join(f"stored in ab.json by {before['stored_by']} (not recomputed: {gone} not "
                   "found)".split()) in text


def test_unprofiled_calibration_moves_every_rank(tmp_path: Path) -> None:
    tls = load_timelines([DEVICE])
    traced = whatif(tls)
    lo, hi = whatif_unprofiled(tls, 5_000.0), whatif_unprofiled(tls, 6_811.6)
    for r in traced.ranks:
        a, b = lo.rank(r.rank), hi.rank(r.rank)
        assert a.predicted_us != b.predicted_us  # each rank follows the given step
        assert r.predicted_us not in (a.predicted_us, b.predicted_us)  # none uncalibrated
        assert a.recorded_us == 5_000.0 and b.recorded_us == 6_811.6
    # each rank's replayed step is its own (at the one scale), their mean the given step
    replayed = [r.replayed_us for r in hi.ranks]
    assert len(set(replayed)) == len(replayed)
    assert sum(replayed) / len(replayed) == pytest.approx(6_811.6, rel=2e-3)
    assert "every rank" in hi.assumptions[-1] and "one scale for all ranks" in \
        hi.assumptions[-1]
    assert hi.to_dict()["step"]["basis"] == "unprofiled step"

