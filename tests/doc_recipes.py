"""The recipes of a doc page as code, applied to a scratch copy of the project.

A fenced block right after a marker comment is one step of a recipe:

- ``<!-- recipe: PATH -->``: the block is a new file at PATH (a module, or a toy trace);
- ``<!-- recipe: PATH, imports -->``: its lines go right after PATH's last top-level import;
- ``<!-- recipe: PATH, in NAME -->``: its lines are entries added at the end of the tuple,
  list or dict NAME (module level) of PATH (in a ``.toml`` file, the list ``NAME = [...]``);
- ``<!-- recipe: PATH, before NAME -->``: the block goes right before the module-level
  statement that assigns NAME.

Blocks may be indented (inside a list item): they are dedented. ``apply`` refuses a new file
that exists and an anchor that is not there, so a recipe that no longer fits the code fails
its test with a line that names the step.
"""

from __future__ import annotations

import ast
import re
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
_MARKED = re.compile(
    r"^[ \t]*<!-- recipe: (?P<path>[^,\s]+)(?:, (?P<how>imports|in \w+|before \w+))? -->[ \t]*\n"
    r"(?:[ \t]*\n)*(?P<indent>[ \t]*)```[\w-]*\n(?P<code>.*?)\n[ \t]*```", re.M | re.S)


@dataclass(frozen=True)
class Step:
    """One marked block: where it goes, how, and its text."""

    path: str
    how: str  # "file", "imports", "in NAME" or "before NAME"
    code: str
    line: int  # of the marker in the page

    def __str__(self) -> str:
        return f"line {self.line}: {self.path}, {self.how}"


def steps(page: Path = ARCHITECTURE) -> list[Step]:
    """Every marked block of ``page``, in page order."""
    text = page.read_text()
    return [Step(m["path"], m["how"] or "file", textwrap.dedent(m["code"]),
                 text.count("\n", 0, m.start()) + 1)
            for m in _MARKED.finditer(text)]


def code_of(path: str, page: Path = ARCHITECTURE) -> str:
    """The text of the new file ``path`` as the page writes it."""
    found = [s.code for s in steps(page) if s.path == path and s.how == "file"]
    assert len(found) == 1, f"{page.name}: {len(found)} blocks write {path}"
    return found[0] + "\n"


def copy_project(dest: Path) -> Path:
    """The project's code (``analyzers/``, ``profplug/``, ``pyproject.toml``) copied to
    ``dest``, a checkout root where ``python -m profplug`` runs the copy."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("analyzers", "profplug"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def apply(all_steps: list[Step], root: Path) -> None:
    """Each step, in order, on the files under ``root``."""
    for step in all_steps:
        target = root / step.path
        if step.how == "file":
            assert not target.exists(), f"{step}: the file exists already"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.code + "\n")
            continue
        assert target.is_file(), f"{step}: no such file"
        text = target.read_text()
        if step.how == "imports":
            text = _after_imports(text, step)
        elif step.how.startswith("before "):
            text = _before(text, step.how.split()[1], step)
        elif target.suffix == ".toml":
            text = _into_toml_list(text, step.how.split()[1], step)
        else:
            text = _into_collection(text, step.how.split()[1], step)
        target.write_text(text)


def _lines_offset(text: str, line: int, col: int = 0) -> int:
    """The character offset of (1-based ``line``, ``col``) in ``text``."""
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[: line - 1]) + col


def _after_imports(text: str, step: Step) -> str:
    imports = [n for n in ast.parse(text).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports, f"{step}: no top-level import to add after"
    at = _lines_offset(text, max(n.end_lineno or n.lineno for n in imports) + 1)
    return text[:at] + step.code.strip("\n") + "\n" + text[at:]


def _assignment(text: str, name: str, step: Step) -> ast.stmt:
    for node in ast.parse(text).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    raise AssertionError(f"{step}: no module-level {name} = ...")


def _before(text: str, name: str, step: Step) -> str:
    at = _lines_offset(text, _assignment(text, name, step).lineno)
    return text[:at] + step.code.strip("\n") + "\n\n\n" + text[at:]


def _into_collection(text: str, name: str, step: Step) -> str:
    value = getattr(_assignment(text, name, step), "value", None)
    if isinstance(value, ast.Call) and len(value.args) == 1:  # MappingProxyType({...})
        value = value.args[0]
    assert isinstance(value, (ast.Tuple, ast.List, ast.Dict)), \
        f"{step}: {name} is not a tuple, list or dict display (or one wrapped in a call)"
    close = _lines_offset(text, value.end_lineno or value.lineno, (value.end_col_offset or 1) - 1)
    return _insert_entries(text, close, step)


def _into_toml_list(text: str, name: str, step: Step) -> str:
    m = re.search(rf"^{re.escape(name)}\s*=\s*\[", text, re.M)
    assert m, f"{step}: no {name} = [ in the file"
    return _insert_entries(text, text.index("]", m.end()), step)


def _insert_entries(text: str, close: int, step: Step) -> str:
    """The step's entries before the closing bracket at ``close``, a comma before them
    when the last entry has none."""
    head = text[:close].rstrip()
    comma = "" if head.endswith((",", "(", "[", "{")) else ","
    entries = step.code.strip().rstrip(",")
    return f"{head}{comma}\n{textwrap.indent(entries, '    ')},\n{text[close:]}"
