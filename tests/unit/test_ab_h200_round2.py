"""The ab round-2 runs measured on one H200 (benchmarks/h200_2026-12-01/ab_round2): given
each shipped ab.json, when ab-report analyzes it again, then it reads (switched runs are
labelled with their block order, ``device+event+none``, which the ab.json schema must accept)
and gives the verdicts recorded in docs/ab.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "h200_2026-12-01" / "ab_round2"


@pytest.mark.parametrize("name, design, resolved", [
    ("dl_switched", "switched", True), ("dl_separate", "separate", False),
    ("dl_aa", "switched", False)])
def test_shipped_h200_ab_runs_read_again(tmp_path: Path, name: str, design: str,
                                        resolved: bool) -> None:
    d = tmp_path / name
    shutil.copytree(ROOT / name, d)
    assert main(["ab-report", str(d)]) == 0
    doc = json.loads((d / "ab.json").read_text())
    other = "device2" if name == "dl_aa" else "event"
    assert doc["design"] == design and doc["summary"][other]["resolved"] is resolved
