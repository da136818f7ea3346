"""docs/architecture.md's worked examples work as written: applied to a scratch copy of the
project (``tests/doc_recipes.py``), the toy reader reads the toy run, the toy analysis runs
where each rank is read (two files on the local pool and on Dask) and shows in the JSON, the
table and the page, and the toy command prints it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import doc_recipes
import pytest

# the toy run's GPU ops per rank, counted by hand in the page's two CSV files
TOY_COUNTS = {"0": 4, "1": 2}


def _profplug(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m profplug ARGS`` in the checkout ``root`` (its copy of the code runs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFPLUG_")}
    return subprocess.run([sys.executable, "-m", "profplug", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = doc_recipes.copy_project(tmp_path_factory.mktemp("checkout"))
    doc_recipes.apply(doc_recipes.steps(), root)
    return root


def test_the_page_marks_a_reader_an_analysis_a_renderer_and_a_command() -> None:
    written = {s.path for s in doc_recipes.steps() if s.how == "file"}
    assert {"analyzers/readers/csvevents/reader.py", "analyzers/stalls/opcounts.py",
            "analyzers/render/opcounts_render.py", "analyzers/commands/opcounts.py",
            "profplug/cli/opcounts.py"} <= written
    edited = {(s.path, s.how) for s in doc_recipes.steps() if s.how != "file"}
    assert {("analyzers/readers/registry.py", "in READERS"), ("pyproject.toml", "in packages"),
            ("analyzers/report/registry.py", "in REGISTRY"),
            ("analyzers/render/registry.py", "in RENDERERS"),
            ("profplug/cli/main.py", "in _COMMANDS")} <= edited


def test_the_recipes_code_runs_in_the_copy_not_the_install(checkout: Path) -> None:
    got = _profplug(checkout, "--help")
    assert got.returncode == 0, got.stderr
    assert re.search(r"^\s+opcounts\s+Each rank's number of GPU ops", got.stdout, re.M)


def test_the_recipes_new_package_is_listed_for_install(checkout: Path) -> None:
    listed = re.search(r"^packages = \[(.*?)\]", (checkout / "pyproject.toml").read_text(),
                       re.M | re.S)
    assert listed and '"profplug.analyzers.readers.csvevents"' in listed.group(1)


@pytest.mark.parametrize("backend", [["-j", "2"], ["--dask", "local:2"]])
def test_the_toy_reader_and_analysis_make_the_report(checkout: Path, tmp_path: Path,
                                                     backend: list[str]) -> None:
    # when the toy run (two CSV files, one rank each) is reported on two worker processes
    out, page = tmp_path / "report.json", tmp_path / "page.html"
    got = _profplug(checkout, "report", "toy_run", "-f", "json", "-o", str(out), "--html",
                    str(page), "-q", *backend)
    assert got.returncode == 0, got.stderr
    doc = json.loads(out.read_text())
    # then the reader read both ranks, and the analysis's parts came back from the workers
    assert [(r["rank"], r["source"]) for r in doc["ranks"]] == [(0, "csv"), (1, "csv")]
    assert doc["op_counts"] == {"per_rank": TOY_COUNTS}
    assert not any("op counts" in w for w in doc["warnings"])
    # and the page holds its own section (its html renderer), not the JSON fallback
    html = page.read_text()
    assert "<h2>GPU ops per rank</h2>" in html
    assert "<tr><td>0</td><td>4</td></tr><tr><td>1</td><td>2</td></tr>" in html


def test_the_toy_analysis_is_in_the_report_table(checkout: Path) -> None:
    got = _profplug(checkout, "report", "toy_run", "-q")
    assert got.returncode == 0, got.stderr
    assert "GPU ops per rank\nrank 0: 4\nrank 1: 2\n" in got.stdout


def test_the_toy_command_prints_the_counts_and_refuses_a_bad_path(checkout: Path) -> None:
    got = _profplug(checkout, "opcounts", "toy_run")
    assert (got.returncode, got.stdout) == (0, "GPU ops per rank\nrank 0: 4\nrank 1: 2\n")
    bad = _profplug(checkout, "opcounts", "no_such_run")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "profplug: error: no_such_run: no such file or directory"


def test_the_toy_reader_refuses_a_bad_row_in_one_line(checkout: Path) -> None:
    bad = checkout / "bad_run" / "r.events.csv"
    bad.parent.mkdir()
    text = (checkout / "toy_run" / "rank1.events.csv").read_text()
    bad.write_text(text.replace("1,gpu,gemm,1005000,", "1,gpu,gemm,soon,"))
    got = _profplug(checkout, "report", "bad_run", "-q")
    assert got.returncode != 0 and "Traceback" not in got.stderr
    assert "r.events.csv:4: expected 9 fields, integers but 'what' and 'name'" in got.stderr


def test_the_recipes_code_passes_the_linter(checkout: Path) -> None:
    # given every file a recipe writes or edits, its added imports sorted (ruff --fix, as
    # the page says)
    touched = sorted({s.path for s in doc_recipes.steps() if s.path.endswith(".py")})
    ruff = [str(Path(sys.executable).parent / "ruff"), "check", "--no-cache"]
    subprocess.run([*ruff, "--fix", "--select", "I", *touched], cwd=checkout,
                   capture_output=True, check=False)
    # then the project's lint rules hold on them
    got = subprocess.run([*ruff, *touched], cwd=checkout, capture_output=True, text=True)
    assert got.returncode == 0, got.stdout

