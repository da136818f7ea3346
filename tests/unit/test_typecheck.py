"""The shipped package type-checks: ``mypy --strict`` (``[tool.mypy]`` in pyproject.toml) over
profplug/ and analyzers/ (tests/mypy_check.py: the installed layout, a planted module), with
zero errors, and every ``# type: ignore`` in the repository names the error it silences and
says why. Its cache (``.pytest_cache/d/mypy``) makes a second run incremental; in a fresh
environment tests/conftest.py fills it before the tests start. ``scripts/typecheck.sh`` runs
this module alone.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest
from mypy_check import INSTALLED_AS, PLANTED, ROOT, run_mypy

PLANTED_CODES = ["return-value", "no-untyped-def"]
# a type-ignore comment: an error code, then a comment saying why
IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)")
EXPLAINED = re.compile(r"\[[a-z-]+(,\s*[a-z-]+)*\]\s*#\s*\S")
CHECKED_FOLDERS = ("profplug", "analyzers", "tests", "benchmarks", "scripts", "examples")


@pytest.fixture(scope="module")
def mypy_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[list[str], str]:
    """mypy's error lines (paths as in the repository) and its summary line."""
    cache = getattr(request.config, "cache", None)
    res = run_mypy(cache.mkdir("mypy") if cache is not None else tmp_path_factory.mktemp("mypy"))
    assert res.returncode in (0, 1), res.stdout + res.stderr  # 2: mypy itself failed
    lines = res.stdout.splitlines()
    errors = [line.replace(INSTALLED_AS, "analyzers", 1) for line in lines
              if ": error: " in line]
    return errors, lines[-1] if lines else res.stderr


def test_analyzer_and_runtime_have_no_type_errors(mypy_run: tuple[list[str], str]) -> None:
    errors, _ = mypy_run
    ours = [e for e in errors if PLANTED not in e]
    assert not ours, f"mypy --strict: {len(ours)} error(s)\n" + "\n".join(ours)


def test_type_check_reports_the_planted_errors(mypy_run: tuple[list[str], str]) -> None:
    """The planted module's two errors, one of them only strict mode reports: the check
    reads the tree (the planted module imports ``profplug.analyzers``) and can fail."""
    errors, _ = mypy_run
    planted = [e for e in errors if PLANTED in e]
    assert [e.rsplit("[", 1)[1].rstrip("]") for e in planted] == PLANTED_CODES, planted


def test_type_check_covers_every_module(mypy_run: tuple[list[str], str]) -> None:
    """Every module of profplug/ and analyzers/ was checked (and the planted one): a tree
    that mypy read only part of would pass the zero-error test unseen."""
    _, summary = mypy_run
    checked = re.search(r"checked (\d+) source files", summary)
    assert checked is not None, summary
    modules = [f for folder in ("profplug", "analyzers") for f in (ROOT / folder).rglob("*.py")
               if "__pycache__" not in f.parts]
    # and a folder without __init__.py (templates/) counts as a namespace package
    assert int(checked.group(1)) >= len(modules) + 1, summary


def unexplained_ignores(files: list[Path], root: Path) -> list[str]:
    """``file:line: comment`` (``file`` relative to ``root``) for each ``# type: ignore``
    comment without an error code, or without a reason after it."""
    bad = []
    for f in files:
        tokens = tokenize.generate_tokens(io.StringIO(f.read_text()).readline)
        for tok in tokens:
            m = IGNORE.search(tok.string) if tok.type == tokenize.COMMENT else None
            if m is not None and not EXPLAINED.match(m.group("rest").strip()):
                bad.append(f"{f.relative_to(root)}:{tok.start[0]}: {tok.string}")
    return bad


def test_every_type_ignore_names_its_error_and_reason() -> None:
    files = sorted(f for folder in CHECKED_FOLDERS for f in (ROOT / folder).rglob("*.py")
                   if ".venv" not in f.parts)
    bad = unexplained_ignores(files, ROOT)
    assert not bad, "a `# type: ignore` needs [its-code] and `# why`:\n" + "\n".join(bad)


def test_unexplained_ignores_are_found(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("a = f()  # type: ignore\n"
                       "b = f()  # type: ignore[attr-defined]\n"
                       "c = f()  # type: ignore  # a reason but no code\n"
                       "d = f()  # type: ignore[misc]  # a marker on a function\n"
                       "e = f()  # type:ignore[misc, arg-type]  # two codes, a reason\n"
                       's = "# type: ignore"  # in a string: not a comment\n')
    found = [line.split(":")[1] for line in unexplained_ignores([planted], tmp_path)]
    assert found == ["1", "2", "3"]
