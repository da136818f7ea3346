"""Paths stored in ab.json and run.json mean the same wherever they are read: ab.json keeps
the ``--whatif`` run relative to its own folder (``run_path``) and by content (``run_fingerprint``); an older
ab.json's relative ``run`` is taken against the ab folder, never against the folder
``ab-report`` runs in; a stored run whose traces are no longer the same run is reported, not
used. ``profplug run`` stores run.json's paths resolved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
AB = ROOT / "sample_traces" / "ab_h200_decode_loop"
OTHER = ROOT / "sample_traces" / "pp2_infer_kineto" / "device"  # another traced run


def _ab(tmp_path: Path, run: str) -> Path:
    """The A/B sample copied, its stored what-if naming ``run`` as an older ab.json did
    (no run_path, no fingerprint)."""
    out = tmp_path / "project" / "ab"
    shutil.copytree(AB, out, ignore=shutil.ignore_patterns("timing_paired", "*.html"))
    doc = json.loads((out / "ab.json").read_text())
    doc["whatif"] = {k: v for k, v in doc["whatif"].items()
                     if k not in ("run_path", "run_fingerprint")}
    doc["whatif"]["run"] = run
    (out / "ab.json").write_text(json.dumps(doc))
    return out


def _whatif(out: Path, capsys) -> dict:
    assert main(["ab-report", str(out), "-f", "json"]) == 0
    return json.loads(capsys.readouterr().out)["whatif"]


def test_a_relative_whatif_run_is_taken_against_the_ab_folder(tmp_path: Path, capsys,
                                                               monkeypatch) -> None:
    out = _ab(tmp_path, "traced_device")
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(OTHER, elsewhere / "traced_device")  # the same name, another run
    monkeypatch.chdir(elsewhere)
    w = _whatif(out, capsys)
    assert w["recomputed"] is True
    assert w["run"] == "traced_device"  # the label as given
    assert w["run_path"] == "traced_device"  # relative to the ab folder: moves with it


def test_a_relative_whatif_run_is_never_found_in_the_working_folder(tmp_path: Path, capsys,
                                                                    monkeypatch) -> None:
    out = _ab(tmp_path, "runs/pp2")
    stored = json.loads((out / "ab.json").read_text())["whatif"]["predicted_step_us"]
    other_project = tmp_path / "other_project"
    shutil.copytree(OTHER, other_project / "runs" / "pp2")  # as the README's example names
    monkeypatch.chdir(other_project)
    w = _whatif(out, capsys)
    assert w["recomputed"] is False and "not found" in w["not_recomputed"]
    assert w["predicted_step_us"] == stored  # kept, not the unrelated run's


def test_a_stored_run_whose_traces_changed_is_reported_not_used(tmp_path: Path,
                                                                capsys) -> None:
    out = _ab(tmp_path, "traced_device")
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    doc = json.loads((out / "ab.json").read_text())["whatif"]
    assert doc["run_fingerprint"] and doc["run_path"] == "traced_device"
    capsys.readouterr()
    (trace,) = (out / "traced_device" / "kineto").glob("rank0*")
    shutil.copyfile(OTHER / "kineto" / "rank0.json.gz", trace)  # another run at that path
    w = _whatif(out, capsys)
    assert w["recomputed"] is False
    assert "no longer holds the traced run" in w["not_recomputed"]
    assert w["predicted_step_us"] == doc["predicted_step_us"]


def test_a_stored_run_moved_with_its_content_is_found_by_its_path(tmp_path: Path,
                                                                  capsys) -> None:
    out = _ab(tmp_path, "traced_device")
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    capsys.readouterr()
    doc = json.loads((out / "ab.json").read_text())
    moved = tmp_path / "moved"
    shutil.copytree(out / "traced_device", moved)  # the same content elsewhere
    doc["whatif"]["run_path"] = str(moved)
    (out / "ab.json").write_text(json.dumps(doc))
    assert _whatif(out, capsys)["recomputed"] is True


def test_run_json_stores_its_trace_paths_resolved(tmp_path: Path, monkeypatch) -> None:
    from profplug.session.launch import RunOptions, _collect_traces

    monkeypatch.chdir(tmp_path)
    info: dict = {}
    _collect_traces(RunOptions(out=Path("runs/pp2"), command=["python"]), None, info)
    assert info["traces"] == [str(tmp_path.resolve() / "runs" / "pp2" / "kineto")]
