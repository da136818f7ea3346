"""Code that runs inside a rank writes each message line in one write() call.

torchrun starts every rank with ``python -u``: stdout and stderr are unbuffered, and print()
writes its text and its newline in two calls. Two ranks printing at once then interleave
into one garbled line and an empty one. One write of a whole line to a pipe is atomic (under
PIPE_BUF bytes).

Rank-side code is everything in ``profplug/`` but the command line (``profplug/cli/``) and
the launcher's modules, which run in profplug's own single process."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "profplug"
PARENT_SIDE = frozenset({"cli"})  # whole folders
LAUNCHER = frozenset({"session/launch.py", "session/abrun.py", "session/outcome.py",
                      "session/progress.py"})


def rank_side_modules(package: Path) -> list[Path]:
    """The ``.py`` files under ``package`` that run inside ranks."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] in PARENT_SIDE or rel.as_posix() in LAUNCHER:
            continue
        found.append(path)
    return found


def print_calls(path: Path) -> list[str]:
    """``file:line`` of every ``print(...)`` call in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print"]


def test_rank_side_code_never_calls_print() -> None:
    modules = rank_side_modules(PACKAGE)
    assert PACKAGE / "hooks.py" in modules and PACKAGE / "session" / "core.py" in modules
    assert PACKAGE / "session" / "launch.py" not in modules
    assert [c for m in modules for c in print_calls(m)] == []


def test_the_print_check_finds_a_planted_print(tmp_path: Path) -> None:
    pkg = tmp_path / "profplug"
    (pkg / "session").mkdir(parents=True)
    (pkg / "cli").mkdir()
    (pkg / "session" / "core.py").write_text(
        "import sys\n\ndef f():\n    print('x', file=sys.stderr)\n")
    (pkg / "session" / "launch.py").write_text("print('parent side')\n")
    (pkg / "cli" / "main.py").write_text("print('parent side')\n")
    found = [c for m in rank_side_modules(pkg) for c in print_calls(m)]
    assert found == ["core.py:4"]


class Writes:
    """A stream that keeps each write() call's text."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_failing_import_hook_is_reported_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    from profplug import hooks

    def broken(module: object) -> None:
        raise RuntimeError("boom")

    err = Writes()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setitem(hooks._callbacks, "planted_module", [broken])
    hooks._fire("planted_module", sys)
    assert err.calls == ["profplug: hook for planted_module failed: RuntimeError('boom')\n"]
