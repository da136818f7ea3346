"""Rough edges a new user hit (issue #17 items 5 and 8): each one's fix, from the outside."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from profplug.analyzers.compare.reports import compare
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.render.registry import render_text
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.stalls.rank import StallOptions
from unit.analyzers.test_compare_synth import write_run

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["report", "compare", "whatif", "run"])
def test_help_shows_no_bool_type_after_flags(command: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # given any command's --help, then flags show no "<bool>" (users typed "--strict true")
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out


def test_a_flag_value_given_as_a_path_gets_a_hint(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, "device")
    assert main(["report", "--strict", "true", str(run)]) == 3  # as any missing trace
    err = capsys.readouterr().err.strip()
    assert err == ("profplug: error: true: no such file or directory (a flag takes no value: "
                   "write e.g. --strict, not --strict true)")


def test_run_refuses_a_flag_value_as_the_command(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # given `profplug run -o D --no-report true -- python3 ...` (it used to run `true`)
    code = main(["run", "-o", str(tmp_path / "d"), "--no-report", "true", "--", "python3",
                 "-c", "1"])
    # then one error line, nothing run, no output directory
    assert code == 2
    assert "looks like a flag's value" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("value", ["-1", "-0.5", "nan", "inf"])
def test_negative_tolerance_is_refused(value: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, "device")
    assert main(["report", str(run), f"--tolerance-us={value}"]) == 2
    assert "--tolerance-us must be a number >= 0" in capsys.readouterr().err
    with pytest.raises(ProfplugError):
        StallOptions(tolerance_ns=-1)


def test_compare_page_shows_the_share_as_a_percentage(tmp_path: Path) -> None:
    # given the synthetic device/event runs (share 1.5 = 150%, as the verdict says)
    a, b = analyze(write_run(tmp_path, "device")), analyze(write_run(tmp_path, "event"))
    page = render_text(compare(a, b, "device", "event"), "html")
    verdicts = page[page.index('id="verdicts"'):]
    verdicts = verdicts[:verdicts.index("</table>")]
    # then the cell shows 150% and keeps the JSON's fraction in data-v
    assert re.findall(r'<td data-v="1.5">([^<]*)</td>', verdicts) == ["150%", "150%"]
    assert "= 150% of it" in verdicts


def test_docs_say_compare_uses_the_gpu_period() -> None:
    doc = (ROOT / "docs" / "html-and-compare.md").read_text()
    faster = doc[doc.index("**Faster run**"):doc.index("**diff**")]
    assert "period_us" in faster and "step_us_mean" not in faster
