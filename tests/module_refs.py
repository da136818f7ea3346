"""References to modules, found in text and resolved against the checkout (for
tests/unit/test_module_references.py).

A reference is one of:
- a path ending in ``.py`` whose first folder is one of the checkout's
  (``whatif/step_figures.py``): some file of the checkout ends with it; a path under
  ``analyzers/`` or ``profplug/`` ending in ``/`` or an extension: it exists;
- a dotted name rooted at a package (``profplug.analyzers.graph.pathgraph.partners``, or
  ``analyzers.graph...`` as the folder is named) or, in Python files, at the tail of a
  module's name (``graph.pathgraph``, ``pathgraph.partners``): the longest such head is a
  module, and the next name is defined in it (a class's member, when it is a class, or a
  member of one of its classes: an instance's); a head that the file binds is that binding
  (an import alias resolves through its module; a variable is no reference);
- a name that was a module's once and is no longer (a file under ``analyzers/`` or
  ``profplug/`` that git's history deleted or renamed), written ``name.x`` or ``name.py``,
  or in a Python file as code (````name````) where the file does not bind it.
Rendered outputs are checked for paths and package-rooted names only. Names under
``profplug.`` that are no module (the NVTX ranges ``profplug.sync.device``), file names
(``report.json``), calls in code (``model.eval()``) and a fallback import for older
checkouts (under ``except ImportError:``) are not references.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", ".git", "__pycache__", "node_modules", ".ci", "build", "dist"}
EXTENSIONS = set(
    "json html txt csv md gz sqlite qdrep log svg js png toml cfg ini yaml yml pt "
    "rep tag TAG whl so py".split()
)  # file names (report.json), not modules
# written like references to modules and are not: the benchmarks' NVTX step ranges, key paths
# in run.json and the status file, an example path, the module a recipe of the docs creates
NOT_REFERENCES = {
    "decode.device",
    "decode.event",
    "observer.traced_us",
    "policy.switches",
    "jobs/run.py",
    "examples/x.py",
}


def _recipe_names() -> set[str]:
    """The modules docs/architecture.md's worked examples create (``doc_recipes``), by path
    and by dotted name, with their packages: named there, and in their test, before they
    exist."""
    import doc_recipes

    out: set[str] = set()
    for step in doc_recipes.steps():
        if step.how != "file" or not step.path.endswith(".py"):
            continue
        parts = step.path.removesuffix(".py").split("/")
        if parts[-1] == "__init__":
            parts.pop()
        dotted = ["profplug", *parts[1:]] if parts[0] == "analyzers" else parts
        if parts[0] == "analyzers":
            dotted.insert(1, "analyzers")
        out |= {step.path, "/".join(step.path.split("/")[:-1]) + "/"}
        out |= {".".join(dotted[:n]) for n in range(3, len(dotted) + 1)}
    return out


NOT_REFERENCES |= _recipe_names()
DOTTED = re.compile(r"(?<![\w./-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w-])")
PY_PATH = re.compile(r"(?<![\w./-])(?:\w[\w.-]*/)+[\w-]+\.py\b")
PY_FILE = re.compile(r"(?<![\w./-])(\w+)\.py\b")
TREE_PATH = re.compile(r"(?<![\w./-])(?:analyzers|profplug)/[\w/.-]*(?:/|\.\w+)(?![\w/])")
DATED = re.compile(r"benchmarks/[^/]*\d{4}-\d\d-\d\d/")  # the dated records: history
CODE = {".py": re.compile(r"``([^`\n]+)``"), ".md": re.compile(r"(?<!`)`([^`\n]+)`(?!`)")}


@dataclass
class Tree:
    """The checkout's modules (dotted name -> file), its files (relative paths) and the
    names modules had once (``former``), with the indexes the checks look names up in."""

    root: Path
    modules: dict[str, Path]
    files: list[str]
    former: set[str] = field(default_factory=set)
    tails: dict[str, list[str]] = field(default_factory=dict)  # a module name's tail -> them
    ends: set[str] = field(default_factory=set)  # every file's path and its tails
    dirs: set[str] = field(default_factory=set)  # every folder's name
    bases: set[str] = field(default_factory=set)  # every module's last name
    packages: set[str] = field(default_factory=set)  # every package's last name

    @classmethod
    def of(cls, root: Path, packages: dict[str, str]) -> Tree:
        """``packages``: folder (relative) -> the package it is installed as."""
        modules = {}
        for folder, package in packages.items():
            for f in sorted((root / folder).rglob("*.py")):
                parts = list(f.relative_to(root / folder).with_suffix("").parts)
                modules[".".join([package, *parts[: -1 if parts[-1] == "__init__" else None]])] = f
        files = []
        for top, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            rel = Path(top).relative_to(root)
            files += [str(rel / n) if rel.parts else n for n in names]
        tree = cls(root, modules, files)
        for m, f in modules.items():
            parts = m.split(".")
            for i in range(len(parts)):
                tree.tails.setdefault(".".join(parts[i:]), []).append(m)
            tree.bases.add(parts[-1])
            if f.name == "__init__.py":
                tree.packages.add(parts[-1])
        for f in files:
            parts = f.split("/")
            tree.ends |= {"/".join(parts[i:]) for i in range(len(parts))}
            tree.dirs |= set(parts[:-1])
        return tree

    def candidates(self, dotted: str) -> list[str]:
        """The modules ``dotted`` names: by the full name, the folder's name (``analyzers.``),
        or the tail of a module's name."""
        full = "profplug." + dotted if dotted.startswith("analyzers.") else dotted
        return self.tails.get(full, [])


def former_names(root: Path, folders: tuple[str, ...] = ("analyzers", "profplug")) -> set[str]:
    """Module names git's history deleted (renames included) under ``folders``; none
    without git."""
    try:
        git = "git log --diff-filter=D --no-renames --name-only --format= --".split()
        out = subprocess.run(
            [*git, *folders], cwd=root, capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {Path(p).stem for p in out.split() if p.endswith(".py")} - {"__init__"}


@cache
def _definitions(path: Path) -> tuple[frozenset[str], dict[str, tuple[frozenset[str], bool]]]:
    """A module's top-level names (the strings of a lazy ``__getattr__`` module too), and
    per class its members and whether it has bases (members it may inherit)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    classes: dict[str, tuple[frozenset[str], bool]] = {}
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.If, ast.Try)):
            stack += node.body + node.orelse + getattr(node, "finalbody", [])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            classes[node.name] = (frozenset(_bound_in(node.body)), bool(node.bases))
        names |= (
            _bound_in([node])
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom))
            else set()
        )
    if "__getattr__" in names:
        names |= {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
    return frozenset(names), classes


def _bound_in(body: list[ast.stmt]) -> set[str]:
    """The names statements of ``body`` bind at their own level."""
    out: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def resolve(tree: Tree, dotted: str) -> str | None:
    """Why ``dotted`` does not resolve (None: it does, or names no module of the tree). A
    name a class of the module has (an instance's member) resolves too."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        mods = tree.candidates(".".join(parts[:k]))
        if not mods:
            continue
        rest = parts[k:]
        if not rest or rest[0].startswith("__"):
            return None
        why = f"{'.'.join(parts[:k])} has no {rest[0]!r}"
        for m in mods:
            names, classes = _definitions(tree.modules[m])
            if rest[0] in names:
                members, inherits = classes.get(rest[0], (frozenset(), True))
                if len(rest) == 1 or inherits or rest[1] in members:
                    return None
                why = f"{'.'.join(parts[: k + 1])} has no {rest[1]!r}"
            elif any(rest[0] in members for members, _ in classes.values()):
                return None
        return why
    return None


@dataclass
class Bindings:
    """What a Python file binds: every identifier its code uses or holds as a string
    (``names``), those it assigns (``stored``), its imports (bound name -> what it names,
    dotted) and the lines of its fallback imports (``except ImportError:``, for older
    checkouts), which keep the names they had."""

    names: set[str] = field(default_factory=set)
    stored: set[str] = field(default_factory=set)
    imports: dict[str, str] = field(default_factory=dict)
    fallback_lines: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, text: str) -> Bindings:
        b = cls()
        nodes = list(ast.walk(ast.parse(text)))
        for n in nodes:
            if (
                isinstance(n, ast.ExceptHandler)
                and isinstance(n.type, ast.Name)
                and n.type.id in ("ImportError", "ModuleNotFoundError")
            ):
                b.fallback_lines |= {
                    ln for stmt in n.body for ln in range(stmt.lineno, (stmt.end_lineno or 0) + 1)
                }
        for n in nodes:
            b.add(n)
        return b

    def add(self, n: ast.AST) -> None:
        if isinstance(n, ast.Name):
            self.names.add(n.id)
            if isinstance(n.ctx, ast.Store):
                self.stored.add(n.id)
        elif isinstance(n, ast.arg):
            self.names.add(n.arg)
            self.stored.add(n.arg)
        elif isinstance(n, ast.Attribute):
            self.names.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            self.names.add(n.value)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno not in self.fallback_lines:
            for a in n.names:
                bound = a.asname or a.name.split(".")[0]
                self.names.add(bound)
                full = f"{n.module}.{a.name}" if isinstance(n, ast.ImportFrom) else a.name
                self.imports[bound] = full if a.asname or isinstance(n, ast.ImportFrom) else bound


def problems(tree: Tree, rel: str, text: str, *, outputs: bool = False) -> list[str]:
    """``rel:line: reference: why`` for each reference of ``text`` (the file ``rel``) that
    does not resolve. ``outputs``: a rendered output (paths and package-rooted names only);
    a Markdown page: paths, package-rooted names and modules' former names."""
    py = rel.endswith(".py")
    b = Bindings.of(text) if py else Bindings()
    heads = tree.bases - set(sys.stdlib_module_names) if py else set()
    former = set() if outputs else tree.former - tree.bases
    found = _paths(tree, text)
    for m in DOTTED.finditer(text):
        ref = m.group(0)
        if (
            ref.rsplit(".", 1)[1] in EXTENSIONS
            or ref in NOT_REFERENCES
            or text.count("\n", 0, m.start()) + 1 in b.fallback_lines
        ):
            continue
        call = text.startswith("(", m.end())
        why = _dotted(tree, ref, b, set() if outputs or call else heads, former)
        found += [(m.start(), ref, why)] if why else []
    if py:  # a module's former name written as code, the file not binding it
        for m in CODE[".py"].finditer(text):
            if m.group(1).strip() in former - b.names:
                found.append((m.start(1), m.group(1), "a module's former name"))
    return [
        f"{rel}:{text.count(chr(10), 0, at) + 1}: {ref}: {why}"
        for at, ref, why in sorted(set(found))
    ]


def _paths(tree: Tree, text: str) -> list[tuple[int, str, str]]:
    """(offset, path, why) for each path of ``text`` that leads nowhere: a file ``a/b.py``
    (``a`` a folder of the checkout) no file ends with, a path under analyzers/ or profplug/
    that does not exist, a ``name.py`` no file is named where ``name`` was a module's or is
    a package's."""
    out = []
    for m in PY_PATH.finditer(text):
        ref = m.group(0)
        if ref not in NOT_REFERENCES and ref.split("/")[0] in tree.dirs and ref not in tree.ends:
            out.append((m.start(), ref, "no such file"))
    for m in TREE_PATH.finditer(text):
        ref = m.group(0)
        if ref not in NOT_REFERENCES and not ref.endswith(".py") and not (tree.root / ref).exists():
            out.append((m.start(), ref, "no such file or folder"))
    for m in PY_FILE.finditer(text):
        if m.group(0) not in tree.ends and m.group(1) in tree.former | tree.packages:
            out.append((m.start(), m.group(0), "no such file"))
    return out


def _dotted(tree: Tree, ref: str, b: Bindings, heads: set[str], former: set[str]) -> str | None:
    """Why the dotted name ``ref`` does not resolve (None: it does or is no reference).
    ``b``: the file's bindings; ``heads``: the module names that start a reference;
    ``former``: the former names that do."""
    head, _, rest = ref.partition(".")
    rooted = head in ("profplug", "analyzers")
    if not rooted and head in b.imports and head not in b.stored:
        real = b.imports[head]
        return resolve(tree, f"{real}.{rest}") if real.startswith("profplug.") else None
    if not rooted and head in b.names:
        return None  # a variable, a parameter, a class or function of the file
    if head in former:
        return "a module's former name"
    if not rooted and head not in heads:
        return None
    why = resolve(tree, ref)
    if (
        why
        and head == "profplug"
        and why.startswith("profplug has no")
        and ref.split(".")[1] not in tree.former
    ):
        return None  # an NVTX range (profplug.sync.device), not a module
    return why
