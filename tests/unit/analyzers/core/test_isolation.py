"""Optional analyses are isolated: given a what-if, a cross-rank analysis or call sites that
fail (any exception, planted), when the default report runs, then every format renders the
rest of the report as usual with one warning line naming the failed analysis, exit 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import pytest
from profplug.analyzers import analyze, cross_rank_analysis
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.optional import failure, isolated
from profplug.analyzers.report.registry import report_analyses
from synth import check_sums
from synth.pipeline import PipelineSpec, write

from profplug.cli.main import main

# what fails -> (the attribute to plant it in, the name its warning line gives it)
PLANTS = {
    "whatif": ("profplug.analyzers.whatif.analysis.whatif", "what-if failed"),
    "cross_rank": ("profplug.analyzers.crossrank.analysis.cross_rank",
                   "cross-rank analysis failed"),
    "callsites": ("profplug.analyzers.stalls.detail.enclosing", "call sites failed"),
}


def boom(*args: Any, **kwargs: Any) -> NoReturn:
    raise ValueError("planted\nfailure")  # a newline: the warning stays one line


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("iso") / "run"
    write(PipelineSpec(stages=2, steps=3), out)
    return out


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
@pytest.mark.parametrize("failing", list(PLANTS))
def test_a_failing_optional_analysis_is_one_warning(run_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str],
                                                    failing: str, fmt: str) -> None:
    where, name = PLANTS[failing]
    monkeypatch.setattr(where, boom)
    out, page = tmp_path / f"report.{fmt}", tmp_path / "report.html"
    # when the default report runs (what-if and cross-rank included)
    rc = main(["report", str(run_dir), "-f", fmt, "-o", str(out), "--html", str(page)])
    err = capsys.readouterr().err
    # then exit 0, no traceback, and one warning line naming it, in every output
    assert rc == 0 and "Traceback" not in err
    text, html = out.read_text(), page.read_text()
    line = f"{name} (ValueError: planted failure at test_isolation.py:"
    assert "Traceback" not in text and line in html
    if fmt == "table":
        flat = " ".join(text.split())  # the table wraps its warnings at 80 columns
        assert flat.count(line) == 1 and "dev_sync" in text
    else:
        assert [x for x in err.splitlines() if name in x] == [
            next(x for x in err.splitlines() if line in x)]
    if fmt == "json":
        doc = json.loads(text)
        assert [w for w in doc["warnings"] if name in w] == [
            next(w for w in doc["warnings"] if line in w)]
        # the rest of the report is there as usual
        assert ("whatif" in doc) is (failing != "whatif")
        assert ("cross_rank" in doc) is (failing != "cross_rank")
        assert all(bool(r["callsites"]) is (failing != "callsites") for r in doc["ranks"])
        assert all(r["syncs"] for r in doc["ranks"])


@pytest.mark.parametrize("failing", list(PLANTS))
def test_the_sum_rule_holds_without_the_failed_analysis(run_dir: Path, failing: str,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setattr(PLANTS[failing][0], boom)
    rep = analyze([run_dir], run=report_analyses(None))
    check_sums(rep)
    assert sum(PLANTS[failing][1] in w for w in rep.warnings) == 1
    assert all(r.has_gpu_work for r in rep.ranks)


def test_a_declining_analysis_keeps_its_own_message() -> None:
    def declines(*args: Any) -> None:
        raise ProfplugError("what-if not run by default on 3,000,000 events")

    assert isolated("what-if", declines) == (
        None, "what-if not run by default on 3,000,000 events")


def test_debug_lets_the_exception_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFPLUG_DEBUG", "1")
    with pytest.raises(ValueError, match="planted"):
        isolated("what-if", boom)


def test_labels_and_the_warning_line() -> None:
    assert report_analyses(None)[0].label == "what-if"
    assert report_analyses(True)[0].label == "what-if"
    assert cross_rank_analysis().label == "cross-rank analysis"
    try:
        boom()
    except ValueError as exc:
        msg = failure("call sites", exc)
    assert msg.startswith("call sites failed (ValueError: planted failure at "
                          "test_isolation.py:") and msg.endswith("; the report goes without it")
