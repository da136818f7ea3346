"""Dask is optional: only ``analyzers/daskpool.py`` imports it, every other analyzer module
imports with dask blocked, and a whole local report runs and loads no dask. Checked the
way ``test_architecture`` checks torch (imports read from the source; a fresh interpreter
where the blocked packages cannot load); the checks are run on a planted violation too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_architecture import ROOT, imports, modules

DASK = ("dask", "distributed")
ALLOWED = {"profplug.analyzers.scale.dask_backend"}  # the one module that talks to Dask

BLOCKED_RUN = """
import importlib.abc, json, sys
BLOCKED = {blocked!r}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"blocked: {{name}}")
        return None

sys.meta_path.insert(0, Block())
import importlib
for m in {mods!r}:
    importlib.import_module(m)
from profplug.analyzers.commands.common import run_report
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


def test_only_daskpool_imports_dask() -> None:
    assert dask_importers(ROOT / "analyzers", "profplug.analyzers") == []
    assert dask_importers(ROOT / "profplug", "profplug") == []


def test_the_check_catches_a_planted_import(tmp_path: Path) -> None:
    pkg = tmp_path / "analyzers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sneaky.py").write_text("def f():\n    from distributed import Client\n")
    (pkg / "daskpool.py").write_text("import dask\n")
    assert dask_importers(pkg, "profplug.analyzers") == ["profplug.analyzers.sneaky:2"]


def test_a_local_report_runs_with_dask_blocked(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from pipeline_synth import PipelineSpec, write

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
