"""The ab.json files shipped with the repository analyze again. The older ones (the sample
A/Bs, the what-if grid's) as separate runs with every policy summarised and nothing flagged;
the A/Bs measured on one H200 (benchmarks/h200_2026-12-01/ab_round2) through ``profplug
ab-report``: switched runs are labelled with their block order (``device+event+none``,
which the ab.json schema must accept) and give the verdicts recorded in docs/ab.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from profplug.analyzers.ab import analyze_ab

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[4]
H200 = ROOT / "benchmarks" / "h200_2026-12-01" / "ab_round2"
OLD = sorted([*ROOT.glob("sample_traces/ab_*/ab.json"),
              *ROOT.glob("benchmarks/whatif_grid_data/ab/*/ab.json")])


def test_the_older_files_validate_unchanged() -> None:
    assert len(OLD) >= 3  # else the test below would have nothing to run on
    from profplug.analyzers.ab.schema import read_regular, validate

    for f in OLD:
        doc = validate(f, read_regular(f))
        assert doc == json.loads(f.read_text())


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.parent.name)
def test_the_older_files_analyze_as_separate_runs(path: Path) -> None:
    doc = json.loads(path.read_text())
    res = analyze_ab(doc["runs"], policies=doc["policies"], rounds=doc["rounds"],
                     order=doc.get("order") or "interleaved", resamples=200)
    assert res.design == "separate" and res.not_reached == []
    assert [s.policy for s in res.summary] == doc["policies"]


@pytest.mark.parametrize("name, design, resolved", [
    ("dl_switched", "switched", True), ("dl_separate", "separate", False),
    ("dl_aa", "switched", False)])
def test_the_h200_runs_give_the_verdicts_in_the_docs(tmp_path: Path, name: str, design: str,
                                                     resolved: bool) -> None:
    d = tmp_path / name
    shutil.copytree(H200 / name, d)
    assert main(["ab-report", str(d), "--rewrite"]) == 0
    doc = json.loads((d / "ab.json").read_text())
    other = "device2" if name == "dl_aa" else "event"
    assert doc["design"] == design and doc["summary"][other]["resolved"] is resolved
