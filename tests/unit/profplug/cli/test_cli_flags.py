"""Flags and their values on the command line: ``--help`` shows no type after a flag; a
flag given a value (``--strict true``) gets a hint, and ``profplug run`` does not run the
value as the command; a number out of its range (``--tolerance-us``, ``--unprofiled``) is one
line and exit 2, whatever the format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.stalls.rank import StallOptions
from synth import one_error, sync_loop, write_run

from profplug.cli.main import main


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


@pytest.mark.parametrize(("args", "says"), [
    (["--tolerance-us", "1e16"], "--tolerance-us must be a number >= 0 and at most 3.6e9"),
    (["--tolerance-us", "nan"], "--tolerance-us must be a number >= 0 and at most 3.6e9"),
])
def test_absurd_tolerances_are_one_line(tmp_path: Path, capsys, args: list[str],
                                        says: str) -> None:
    p = sync_loop(tmp_path / "rank0.json")
    assert main(["report", str(p), *args]) == 2
    assert says in one_error(capsys)


@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-5", "0"])
def test_absurd_unprofiled_step_times_are_one_line(tmp_path: Path, capsys, value: str) -> None:
    p = sync_loop(tmp_path / "rank0.json")
    for fmt in ("table", "json"):
        assert main(["whatif", str(p), "--unprofiled", value, "-f", fmt]) == 2
        line = one_error(capsys)
        assert "--unprofiled takes the measured unprofiled step time in us" in line
        assert "int64" not in line


@pytest.mark.parametrize("value", ["1e-308", "5e-324", "0.0001"])
def test_unprofiled_below_a_nanosecond_is_one_line(tmp_path: Path, capsys, value: str) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    assert main(["whatif", str(trace), "--unprofiled", value, "-f", "json"]) == 2
    assert "--unprofiled takes" in one_error(capsys)


def test_unprofiled_at_a_nanosecond_gives_finite_json(tmp_path: Path, capsys) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    assert main(["whatif", str(trace), "--unprofiled", "0.001", "-f", "json"]) == 0
    # strict JSON: json.loads alone would take Infinity and NaN
    json.loads(capsys.readouterr().out, parse_constant=_not_json)


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
