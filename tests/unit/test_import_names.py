"""A module of the project is imported under its own name: no ``import a.b as x`` or ``from a
import b as x`` that gives a project module another name (``stats as stepstats``), so that a
reader meets one name per module. A leading underscore (``import profplug.steps as _steps``:
kept out of the importer's names) is the same name. Third-party aliases (``numpy as np``)
and aliases of functions or classes are not checked. The check is also run on a planted
rename, to show that it can fail.

Project modules: every module of profplug/ and analyzers/ (as ``profplug.analyzers``), and
the helper modules that tests/ and benchmarks/ import by their file's name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from parsed_source import parsed

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"profplug": "profplug", "analyzers": "profplug.analyzers"}
HELPER_FOLDERS = ("tests", "benchmarks", "scripts")  # their own .py files import by file name
CHECKED = ("profplug", "analyzers", "tests", "benchmarks", "scripts", "examples")


def project_modules(root: Path) -> set[str]:
    """The dotted names of the project's modules under ``root`` (see the module's doc)."""
    out: set[str] = set()
    for folder, package in PACKAGES.items():
        for f in (root / folder).rglob("*.py"):
            parts = list(f.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.add(".".join([package, *parts]))
    for folder in HELPER_FOLDERS:
        out |= {f.stem for f in (root / folder).rglob("*.py") if f.stem != "__init__"}
    return out


def _same(alias: str, own: str) -> bool:
    return alias in (own, "_" + own)


def renaming_imports(root: Path, folders: tuple[str, ...] = CHECKED) -> list[str]:
    """``file:line: M as X`` for every import of a project module under another name."""
    known = project_modules(root)
    bad = []
    for folder in folders:
        for f in sorted((root / folder).rglob("*.py")):
            if ".venv" in f.parts:
                continue
            for node in ast.walk(parsed(f)):
                if isinstance(node, ast.Import):
                    named = [(a.name, a.asname) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    named = [(f"{node.module}.{a.name}", a.asname) for a in node.names]
                else:
                    continue
                bad += [f"{f.relative_to(root)}:{node.lineno}: {mod} as {alias}"
                        for mod, alias in named if alias is not None and mod in known
                        and not _same(alias, mod.rsplit(".", 1)[-1])]
    return bad


def test_no_import_renames_a_project_module() -> None:
    bad = renaming_imports(ROOT)
    assert not bad, "imports that rename a project module:\n" + "\n".join(bad)


def test_the_check_catches_a_planted_rename(tmp_path: Path) -> None:
    (tmp_path / "analyzers" / "steps").mkdir(parents=True)
    for rel in ("analyzers/__init__.py", "analyzers/steps/__init__.py",
                "analyzers/steps/stats.py", "profplug/__init__.py", "tests/grid_table.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "tests" / "test_x.py").write_text(
        "import numpy as np\n"
        "import profplug.analyzers.steps.stats as stats\n"
        "from profplug.analyzers.steps import stats as _stats\n"
        "from profplug.analyzers.steps.stats import median as med\n"
        "from profplug.analyzers.steps import stats as stepstats\n"
        "import grid_table as gt\n")
    assert renaming_imports(tmp_path, ("tests",)) == [
        "tests/test_x.py:5: profplug.analyzers.steps.stats as stepstats",
        "tests/test_x.py:6: grid_table as gt"]
