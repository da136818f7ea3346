"""``profplug ab-report DIR``: an existing A/B analyzed again from its ``ab.json``, nothing run
(synthetic runs): the current statistics replace the stored ones, the page and the table are
written, the exit status is ``ab``'s, usage errors are one line."""

from __future__ import annotations

import json
from pathlib import Path

from profplug.analyzers.render.registry import render_text
from synth import ab_result, ab_runs

from profplug.cli.main import main


def _write(out: Path, res) -> dict:
    out.mkdir()
    doc = json.loads(render_text(res, "json"))
    (out / "ab.json").write_text(json.dumps(doc))
    return doc


def test_the_same_runs_give_the_same_ab_json(tmp_path, capsys) -> None:
    res = ab_result(ab_runs(rounds=4), rounds=4)
    doc = _write(tmp_path / "ab", res)
    assert main(["ab-report", str(tmp_path / "ab"), "--rewrite"]) == 0
    assert json.loads((tmp_path / "ab" / "ab.json").read_text()) == doc
    out = capsys.readouterr()
    assert "verdict: event: 1.99x faster than device" in out.out
    assert "analyzed again from its 12 runs (nothing was run)" in out.err


def test_an_old_ab_json_gets_the_current_statistics_page_and_table(tmp_path, capsys) -> None:
    """As a shipped sample made before the 3-round rule: a 2-round 'CI' and a verdict."""
    res = ab_result(ab_runs(rounds=2), rounds=2)
    res.whatif = {"run": "runs/pp2", "predicted_step_us": 1010.0, "recorded_step_us": 2400.0,
                  "band_pct": 4.0, "predicted_speedup": 2.4, "prediction_in_ci": True,
                  "measured_ci95_us": [1000.0, 1020.0]}
    doc = json.loads(render_text(res, "json"))
    doc["summary"]["event"]["speedup_ci95"] = [1.5, 2.5]  # what the old analysis said
    doc["verdicts"]["event"] = "event: 1.99x faster than device (95% CI 1.50-2.50x, 2 rounds)"
    out = tmp_path / "ab"
    out.mkdir()
    (out / "ab.json").write_text(json.dumps(doc))
    page = tmp_path / "ab.html"
    assert main(["ab-report", str(out), "--html", str(page), "--rewrite"]) == 0
    new = json.loads((out / "ab.json").read_text())
    ev = new["summary"]["event"]
    assert ev["speedup_ci95"] is None and ev["resolved"] is None
    assert new["verdicts"]["event"].startswith("event: too few rounds for a confidence "
                                               "interval (2; at least 3), no verdict")
    wi = new["whatif"]
    assert wi["measured_ci95_us"] is None and "prediction_in_ci" not in wi
    assert wi["predicted_step_us"] == 1010.0 and wi["measured_policy"] == "event"
    html = page.read_text()
    assert html.count('<svg id="ab-plot-') == 4 and "<script" not in html
    assert "too few rounds" in " ".join(capsys.readouterr().out.split())


def test_differing_outputs_in_the_stored_runs_exit_1(tmp_path, capsys) -> None:
    changed = [f"1-{i}" for i in range(22)]
    changed[3] = "planted"
    _write(tmp_path / "ab", ab_result(ab_runs(digests={(4, 1): changed})))
    assert main(["ab-report", str(tmp_path / "ab")]) == 1
    assert "OUTPUTS DIFFER: run 4 (round 1, event)" in capsys.readouterr().err


def test_an_interrupted_ab_keeps_its_status(tmp_path) -> None:
    _write(tmp_path / "ab", ab_result(ab_runs(rounds=3), interrupted=143))
    assert main(["ab-report", str(tmp_path / "ab")]) == 143


def test_usage_errors(tmp_path, capsys) -> None:
    assert main(["ab-report", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["ab-report", str(tmp_path / "empty")]) == 2
    assert "ab.json: not found" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "ab.json").write_text(json.dumps({"version": 9, "runs": [], "policies": ["device"]}))
    assert main(["ab-report", str(bad)]) == 2
    assert "version 9" in capsys.readouterr().err
    _write(tmp_path / "ab", ab_result(ab_runs()))
    assert main(["ab-report", str(tmp_path / "ab"), "--whatif", "/nonexistent/run"]) == 2
    assert "/nonexistent/run: no such file or directory" in capsys.readouterr().err
