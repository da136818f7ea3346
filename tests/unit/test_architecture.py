"""The layout holds: the analyzer never imports torch, profplug.session or profplug.cli; dask is
optional (only ``analyzers/scale/dask_backend.py`` imports it, every other analyzer module
imports with dask blocked, and a whole local report runs and loads no dask); no import cycle
anywhere in profplug; no two rooms import each other, and each imports only the layers below
it; run-level analyses are described by data (no attribute hung on a function); no module
over 400 lines.

Rooms: under profplug/, the runtime modules (``runtime``: steps, patching, p2p, hooks...),
``session`` and ``cli``; under analyzers/, each subpackage (or top-level module) is one. The
packages' fronts (``profplug``, ``profplug.analyzers``) load their names lazily from any room.

Imports are read from the source (AST): module-level, function-level and ``TYPE_CHECKING``
ones alike, relative ones resolved, plus ``importlib.import_module("...")`` /
``__import__("...")`` with a literal name, or an f-string (``f"profplug.cli.{name}"``: any
module right under its literal start). Each check is also run on planted violations in
a temporary folder, to show that it can fail.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

from parsed_source import parsed
from synth.pipeline import PipelineSpec, write

ROOT = Path(__file__).resolve().parents[2]
# source folder -> the package it is installed as (pyproject's package-dir)
PACKAGES = {ROOT / "profplug": "profplug", ROOT / "analyzers": "profplug.analyzers"}
FORBIDDEN_IN_ANALYZER = ("torch", "profplug.session", "profplug.cli")
MAX_LINES = 400
# the rooms, bottom to top: a room imports only rooms of the layers below its own
LAYERS = (("core",), ("steps",), ("readers",), ("stalls",), ("graph",), ("whatif", "crossrank"),
          ("scale",), ("report", "ab"), ("compare",), ("render",), ("commands",), ("runtime",),
          ("session",), ("cli",))
FRONTS = ("analyzers", "profplug")  # the packages' __init__: names loaded lazily, from any room


def modules(folder: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under ``folder`` (a package named ``package``)."""
    out = {}
    for f in sorted(folder.rglob("*.py")):
        parts = list(f.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([package, *parts])] = f
    return out


def imports(path: Path, name: str, known: set[str] | None = None) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file of module ``name``.

    ``from P import x`` names ``P.x`` when that is a module in ``known``, else ``P``.
    """
    known = known or set()
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, int]] = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - (node.level - 1 if is_pkg else node.level)]
                pkg = ".".join([*base, *([node.module] if node.module else [])])
            else:
                pkg = node.module or ""
            for a in node.names:
                sub = f"{pkg}.{a.name}"
                out.append((sub if sub in known else pkg, node.lineno))
        elif (isinstance(node, ast.Call) and node.args
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id == "__import__"))):
            out += [(m, node.lineno) for m in _named(node.args[0], known)]
    return out


def _named(arg: ast.expr, known: set[str]) -> list[str]:
    """The modules an import by name may import: a literal's, or for an f-string that
    starts with ``"P."`` (``f"profplug.cli.{name}"``) every module of ``known`` right under P."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        return sorted(m for m in known if m.startswith(prefix) and "." not in m[len(prefix):])
    return []


def forbidden_imports(folder: Path, package: str) -> list[str]:
    """``file:line imports X`` for every import of FORBIDDEN_IN_ANALYZER under ``folder``."""
    mods = modules(folder, package)
    bad = []
    for name, path in mods.items():
        for target, line in imports(path, name, set(mods)):
            if any(target == f or target.startswith(f + ".") for f in FORBIDDEN_IN_ANALYZER):
                bad.append(f"{path.relative_to(folder.parent)}:{line} imports {target}")
    return bad


def import_graph(packages: dict[Path, str]) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    mods: dict[str, Path] = {}
    for folder, package in packages.items():
        mods.update(modules(folder, package))
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = {t for t, _ in imports(path, name, set(mods))}
        graph[name] = {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def long_modules(folders: list[Path]) -> list[str]:
    """``folder/file: N lines`` for every module over MAX_LINES."""
    return [f"{f.relative_to(d.parent)}: {n} lines" for d in folders
            for f in sorted(d.rglob("*.py")) if (n := len(f.read_text().splitlines())) > MAX_LINES]


@cache
def project_graph() -> dict[str, set[str]]:
    """The import graph of profplug and its analyzer, read once for all the checks."""
    return import_graph(PACKAGES)


def room(module: str) -> str:
    """The room of a module: in the analyzer, its subpackage (or top-level module) without
    the ``profplug.analyzers.`` prefix; else ``cli`` (``python -m profplug`` included),
    ``session``, ``runtime`` (the other modules of profplug/), or ``profplug`` (the
    package's front)."""
    parts = module.split(".")
    if module != "profplug.analyzers" and not module.startswith("profplug.analyzers."):
        if module in ("profplug", "profplug.__main__"):
            return "profplug" if module == "profplug" else "cli"
        return parts[1] if len(parts) >= 2 and parts[1] in ("cli", "session") else "runtime"
    return parts[2] if len(parts) > 2 else "analyzers"


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Room -> the other rooms its modules import."""
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        out.setdefault(room(a), set()).update(room(b) for b in targets if room(b) != room(a))
    return out


def against_layers(rooms: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]
                   ) -> list[str]:
    """``A imports B`` for every import of a room not below A in ``layers`` (a package's
    front, FRONTS, may import any: it loads its names lazily)."""
    level = {r: i for i, layer in enumerate(layers) for r in layer}
    return sorted(f"{a} imports {b}" for a, targets in rooms.items() if a not in FRONTS
                  for b in targets if level.get(b, -1) >= level.get(a, len(layers)))


def hung_attributes(folder: Path) -> list[str]:
    """``file:line f.attr`` for every attribute set on a function of the same module (an
    analysis described by attributes rather than by its spec)."""
    out = []
    for f in sorted(folder.rglob("*.py")):
        tree = parsed(f)
        fns = {n.name for n in ast.walk(tree)
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out += [f"{f.relative_to(folder.parent)}:{node.lineno} {x.value.id}.{x.attr}"
                        for x in targets if isinstance(x, ast.Attribute)
                        and isinstance(x.value, ast.Name) and x.value.id in fns]
    return out


# the start of a script run in a fresh interpreter where the ``BLOCKED`` packages cannot load
BLOCKER = """
import importlib, importlib.abc, json, sys
BLOCKED = {blocked!r}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"blocked: {{name}}")
        return None
"""

BLOCKED_IMPORT = BLOCKER + """
sys.path[:0] = {path!r}
sys.meta_path.insert(0, Block())
failed = {{}}
for m in {mods!r}:
    try:
        importlib.import_module(m)
    except Exception as exc:
        failed[m] = f"{{type(exc).__name__}}: {{exc}}"
loaded = sorted(n for n in sys.modules if any(n == b or n.startswith(b + ".") for b in BLOCKED))
print(json.dumps({{"failed": failed, "loaded": loaded}}))
"""


def import_blocked(mods: list[str], path: list[str]) -> dict[str, object]:
    """Import ``mods`` in a fresh interpreter where the forbidden packages cannot load."""
    code = BLOCKED_IMPORT.format(blocked=FORBIDDEN_IN_ANALYZER, path=path, mods=mods)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


# the packages only the dask backend may import, and a local report with them blocked
DASK = ("dask", "distributed")
ALLOWED = {"profplug.analyzers.scale.dask_backend"}  # the one module that talks to Dask

BLOCKED_RUN = BLOCKER + """
sys.meta_path.insert(0, Block())
for m in {mods!r}:
    importlib.import_module(m)
from profplug.analyzers.commands.report import run_report
from pathlib import Path
code = run_report({paths!r}, fmt="json", output=Path({out!r}), jobs=2, quiet=True)
loaded = sorted(n for n in sys.modules if any(n == b or n.startswith(b + ".") for b in BLOCKED))
print(json.dumps({{"code": code, "loaded": loaded}}))
"""


def dask_importers(folder: Path, package: str) -> list[str]:
    """``module:line`` for every import of dask outside ALLOWED."""
    mods = modules(folder, package)
    return [f"{name}:{line}" for name, path in mods.items() if name not in ALLOWED
            for target, line in imports(path, name, set(mods))
            if any(target == d or target.startswith(d + ".") for d in DASK)]


# ------------------------------------------------------------------------------------ tests
def test_analyzer_never_imports_torch_session_or_cli() -> None:
    assert forbidden_imports(ROOT / "analyzers", "profplug.analyzers") == []


def test_every_analyzer_module_imports_with_torch_session_and_cli_blocked() -> None:
    mods = sorted(modules(ROOT / "analyzers", "profplug.analyzers"))
    assert len(mods) > 30
    assert import_blocked(mods, []) == {"failed": {}, "loaded": []}


def test_no_import_cycle_in_profplug() -> None:
    graph = project_graph()
    assert "profplug.analyzers.stalls.rank" in graph and "profplug.cli.report" in graph
    assert cycles(graph) == []


def test_no_two_rooms_import_each_other() -> None:
    rooms = room_graph(project_graph())
    assert {"core", "whatif", "crossrank", "scale", "report", "runtime", "session", "cli"} \
        <= set(rooms)
    assert cycles(rooms) == []


def test_each_room_imports_only_the_layers_below_it() -> None:
    rooms = room_graph(project_graph())
    assert set(rooms) - set(FRONTS) <= {r for layer in LAYERS for r in layer}
    assert against_layers(rooms, LAYERS) == []


def test_no_analysis_is_described_by_attributes_on_a_function() -> None:
    # (the plugin marks the functions it wraps, ``__profplug__``: not analyses)
    assert hung_attributes(ROOT / "analyzers") == []


def test_the_room_and_attribute_checks_catch_planted_violations(tmp_path: Path) -> None:
    # given two rooms that import each other through a third, and a layer imported upwards
    pkg = tmp_path / "analyzers"
    for sub in ("core", "whatif", "crossrank", "scale"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "whatif" / "model.py").write_text("from ..crossrank import matching\n")
    (pkg / "crossrank" / "matching.py").write_text("from ..scale import run_level\n")
    (pkg / "scale" / "run_level.py").write_text("def f():\n    from ..whatif import model\n")
    (pkg / "core" / "names.py").write_text("import json\n")
    # and an analysis described by an attribute on its function
    (pkg / "core" / "hung.py").write_text("def run():\n    pass\n\n\nrun.label = 'x'\n")
    rooms = room_graph(import_graph({pkg: "profplug.analyzers"}))
    # then the cycle through the three rooms is found, and the imports against the layers
    assert cycles(rooms) == [["crossrank", "scale", "whatif"]]
    assert against_layers(rooms, LAYERS) == ["crossrank imports scale", "whatif imports crossrank"]
    assert hung_attributes(pkg) == ["analyzers/core/hung.py:5 run.label"]


def test_fstring_imports_and_the_plugins_rooms_catch_planted_cycles(tmp_path: Path) -> None:
    # given an entry point importing its commands through an f-string, a command importing
    # it back, and a runtime module importing the session that imports it
    pkg = tmp_path / "profplug"
    for sub in ("cli", "session"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "main.py").write_text("import importlib\n\n\ndef register(n):\n"
                                         "    importlib.import_module(f'profplug.cli.{n}')\n")
    (pkg / "cli" / "cmd.py").write_text("from profplug.cli.main import register\n")
    (pkg / "session" / "boot.py").write_text("def f():\n    from profplug import steps\n")
    (pkg / "steps.py").write_text("def f():\n    from profplug.session import boot\n")
    graph = import_graph({pkg: "profplug"})
    # then both module cycles are found, and the runtime room importing the session
    assert sorted(cycles(graph)) == [["profplug.cli.cmd", "profplug.cli.main"],
                                     ["profplug.session.boot", "profplug.steps"]]
    rooms = room_graph(graph)
    assert cycles(rooms) == [["runtime", "session"]]
    assert against_layers(rooms, LAYERS) == ["runtime imports session"]


def listed_packages(pyproject: str) -> set[str]:
    """The packages pyproject.toml's ``[tool.setuptools] packages`` installs."""
    import tomllib

    return set(tomllib.loads(pyproject)["tool"]["setuptools"]["packages"])


def unlisted_packages(packages: dict[Path, str], listed: set[str]) -> list[str]:
    """Every package (a folder with ``__init__.py``) that a plain install would leave out."""
    found = {name for folder, package in packages.items()
             for name, path in modules(folder, package).items() if path.name == "__init__.py"}
    return sorted(found - listed)


def test_every_package_is_installed() -> None:
    listed = listed_packages((ROOT / "pyproject.toml").read_text())
    assert {"profplug.analyzers.core", "profplug.analyzers.readers.kineto"} <= listed
    assert unlisted_packages(PACKAGES, listed) == []


def test_the_install_check_catches_a_planted_unlisted_package(tmp_path: Path) -> None:
    (tmp_path / "analyzers" / "newidea").mkdir(parents=True)
    (tmp_path / "analyzers" / "__init__.py").write_text("")
    (tmp_path / "analyzers" / "newidea" / "__init__.py").write_text("")
    got = unlisted_packages({tmp_path / "analyzers": "profplug.analyzers"}, {"profplug.analyzers"})
    assert got == ["profplug.analyzers.newidea"]


def test_no_module_over_400_lines() -> None:
    assert long_modules([ROOT / "profplug", ROOT / "analyzers"]) == []


def test_the_checks_catch_planted_violations(tmp_path: Path) -> None:
    # given an analyzer-like package with one violation per kind, and a clean module
    pkg = tmp_path / "analyzers"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "clean.py").write_text("import json\nfrom . import sub\n")
    (pkg / "plain.py").write_text("import torch.cuda\n")
    (pkg / "relative.py").write_text("from ..session import launch\n")
    (pkg / "sub" / "late.py").write_text("def f():\n    from profplug.cli.main import main\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    import torch\n")
    (pkg / "dynamic.py").write_text("import importlib\nimportlib.import_module('torch')\n")
    (pkg / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    # a cycle: a -> b -> a (b only while type checking)
    (pkg / "a.py").write_text("from .b import B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from .a import A\n")

    # then each check names them
    bad = forbidden_imports(pkg, "profplug.analyzers")
    assert bad == ["analyzers/dynamic.py:2 imports torch",
                   "analyzers/plain.py:1 imports torch.cuda",
                   "analyzers/relative.py:1 imports profplug.session",
                   "analyzers/sub/late.py:2 imports profplug.cli.main",
                   "analyzers/typed.py:3 imports torch"]
    assert cycles(import_graph({pkg: "profplug.analyzers"})) == [
        ["profplug.analyzers.a", "profplug.analyzers.b"]]
    assert long_modules([pkg]) == ["analyzers/long.py: 401 lines"]
    # and importing with the forbidden packages blocked fails where they are imported
    (tmp_path / "plant").mkdir()
    (tmp_path / "plant" / "__init__.py").write_text("")
    (tmp_path / "plant" / "ok.py").write_text("import json\n")
    (tmp_path / "plant" / "bad.py").write_text("import torch\n")
    res = import_blocked(["plant.ok", "plant.bad"], [str(tmp_path)])
    assert list(res["failed"]) == ["plant.bad"]
    assert "blocked: torch" in res["failed"]["plant.bad"]


def test_only_the_dask_backend_imports_dask() -> None:
    assert dask_importers(ROOT / "analyzers", "profplug.analyzers") == []
    assert dask_importers(ROOT / "profplug", "profplug") == []


def test_the_dask_check_catches_a_planted_import(tmp_path: Path) -> None:
    pkg = tmp_path / "analyzers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sneaky.py").write_text("def f():\n    from distributed import Client\n")
    (pkg / "scale").mkdir()
    (pkg / "scale" / "__init__.py").write_text("")
    (pkg / "scale" / "dask_backend.py").write_text("import dask\n")
    assert dask_importers(pkg, "profplug.analyzers") == ["profplug.analyzers.sneaky:2"]


def test_a_local_report_runs_with_dask_blocked(tmp_path: Path) -> None:
    files, _ = write(PipelineSpec(stages=2, steps=2), tmp_path / "run")
    mods = sorted(m for m in modules(ROOT / "analyzers", "profplug.analyzers")
                  if m not in ALLOWED)
    code = BLOCKED_RUN.format(blocked=DASK, mods=mods, paths=[str(f) for f in files],
                              out=str(tmp_path / "r.json"))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == {"code": 0, "loaded": []}
    assert [r["rank"] for r in json.loads((tmp_path / "r.json").read_text())["ranks"]] == [0, 1]
