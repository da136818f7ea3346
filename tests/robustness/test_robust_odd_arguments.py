"""Arguments a user may type by mistake get one line and exit 2 or 3, or the right answer:
an empty path (``,``, ``,,``, ``''``), ``-j 0``, ``-o out.json`` without ``-f`` (the format
its extension names), a ``--step-range`` regex Python cannot compile (an OverflowError),
a Chrome DevTools trace (not Kineto), ``--version``, a Ctrl-C while the CLI imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from synth import one_error, sync_loop

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [["report", ","], ["report", ",,"], ["report", ""],
                                  ["compare", ",", "X"], ["whatif", ","],
                                  ["compare", "", "X"]])
def test_an_empty_path_is_one_line_not_the_current_folder(tmp_path: Path, capsys,
                                                          monkeypatch, argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    sync_loop(tmp_path / "rank0.json")  # what '' read before: the current folder
    assert main(argv) in (2, 3)
    line = one_error(capsys)
    assert "no trace path given" in line or "an empty argument ('')" in line


def test_an_empty_argument_after_the_job_separator_is_the_jobs_own() -> None:
    from profplug.cli.main import _empty_argument

    assert _empty_argument(["run", "-o", "d", "--", "python", "x.py", ""]) is None
    assert "after -o" in str(_empty_argument(["report", "-o", "", "x"]))


def test_zero_jobs_is_refused(tmp_path: Path, capsys) -> None:
    assert main(["report", str(sync_loop(tmp_path / "rank0.json")), "-j", "0"]) == 2
    assert "--jobs 0: give 1 or more" in one_error(capsys)


@pytest.mark.parametrize(("name", "check"), [
    ("out.json", lambda t: json.loads(t)["ranks"]),
    ("out.CSV", lambda t: t.splitlines()[0].startswith("rank,")),
    ("out.txt", lambda t: "profplug stall report" in t)])
def test_the_output_format_follows_the_extension_unless_given(tmp_path: Path, name: str,
                                                              check: object) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    out = tmp_path / name
    assert main(["report", str(trace), "-o", str(out), "-q"]) == 0
    assert check(out.read_text())
    assert main(["report", str(trace), "-o", str(out), "-f", "table", "-q"]) == 0
    assert "profplug stall report" in out.read_text()  # -f given: as asked


def test_an_html_output_path_points_to_html(tmp_path: Path, capsys) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    assert main(["report", str(trace), "-o", str(tmp_path / "page.html")]) == 2
    assert "the HTML page is written by --html" in one_error(capsys)
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("regex", ["re:a{99999999999}", "re:" + "(" * 5000 + ")" * 5000])
def test_a_step_range_regex_python_cannot_compile_is_one_line(tmp_path: Path, capsys,
                                                              regex: str) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    assert main(["report", str(trace), "--step-range", regex]) == 2
    assert "bad regular expression" in one_error(capsys)


def test_a_chrome_devtools_trace_is_not_read_as_kineto(tmp_path: Path, capsys) -> None:
    ev = [{"name": "RunTask", "cat": "disabled-by-default-devtools.timeline", "ph": "X",
           "ts": 1000 + 10 * i, "dur": 5, "pid": 1, "tid": 2, "args": {}} for i in range(20)]
    p = tmp_path / "Trace-20261207.json"
    p.write_text(json.dumps({"traceEvents": ev, "metadata": {"source": "DevTools"}}))
    assert main(["report", str(p)]) == 3
    line = one_error(capsys)
    assert "not a Kineto trace: a Chrome DevTools trace" in line


def test_a_host_only_kineto_trace_is_still_kineto(tmp_path: Path, capsys) -> None:
    """The check leaves a real Kineto trace without GPU work alone (its categories)."""
    ev = [{"name": "aten::add", "cat": "cpu_op", "ph": "X", "ts": 10 * i, "dur": 5,
           "pid": 1, "tid": 2} for i in range(20)]
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    assert main(["report", str(p), "-q"]) == 0


def test_version_is_printed() -> None:
    from profplug.analyzers.core.version import __version__

    out = subprocess.run([sys.executable, "-m", "profplug", "--version"], capture_output=True,
                         text=True, check=True, cwd=ROOT)
    assert out.stdout == f"profplug {__version__}\n"


_INTERRUPTED_IMPORT = """
import builtins, sys
real = builtins.__import__
def interrupted(name, *a, **kw):
    if name == "typer":
        raise KeyboardInterrupt
    return real(name, *a, **kw)
builtins.__import__ = interrupted
from profplug.cli import main
sys.exit(main())
"""


def test_a_ctrl_c_while_the_cli_imports_is_one_line() -> None:
    out = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT, "report", "x"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 130
    assert out.stderr == "profplug: interrupted\n"


def test_a_ctrl_c_inside_a_command_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    def interrupted(*args: object, **kw: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("profplug.analyzers.commands.report.run_report", interrupted)
    assert main(["report", str(sync_loop(tmp_path / "rank0.json"))]) == 130
    assert capsys.readouterr().err == "profplug: interrupted\n"


def _bare_env() -> dict[str, str]:
    """site-packages on the path without their .pth files: no install's finder of
    profplug (the editable one) is active; the checkout's profplug/ is what imports."""
    import sysconfig

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    return env


def test_the_checkout_runs_without_an_install() -> None:
    code = ("import importlib.util, profplug, profplug.analyzers as a; print(a.__file__); "
            "print(importlib.util.find_spec('profplug.tests'))")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=_bare_env(), check=True)
    path, tests = out.stdout.splitlines()
    assert Path(path) == ROOT / "analyzers" / "__init__.py"
    assert tests == "None"  # only profplug.analyzers is mapped, not the checkout's root
    run = subprocess.run([sys.executable, "-S", "-m", "profplug", "report",
                          "sample_traces/h200_three_waits/kineto", "-f", "json", "-q"],
                         capture_output=True, text=True, cwd=ROOT, env=_bare_env())
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["ranks"]
