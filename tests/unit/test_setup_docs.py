"""Set-up as a new user meets it: the README says how to get a CPU torch
on a stock machine, and every command that starts torchrun uses the venv's own."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").glob("*.py"))]


def test_quickstart_says_how_to_get_a_cpu_torch() -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Quickstart")
    quick = readme[start:readme.index("\n## ", start)]  # up to the next section
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in quick
    assert "nvidia-" in quick and "CUDA build" in quick  # what the plain command pulls
    # and CI still runs exactly the plain second command
    ci = (ROOT / ".ci" / "run").read_text()
    plain = [x for x in quick.splitlines() if x.startswith("python3 -m venv")][1]
    assert plain in ci


def test_every_torchrun_command_is_the_venvs_own() -> None:
    # given every command line in the README, the docs and the examples' docstrings
    bare = []
    for f in DOCS:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for m in re.finditer(r"(\S*)torchrun --nproc", line):
                if m.group(1).lstrip("`('\"") != ".venv/bin/":  # quoted or in parentheses
                    bare.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    # then none relies on an activated venv or a torchrun on PATH
    assert bare == []
    # and the venv's own torchrun exists (the test run's venv is the Quickstart's)
    assert (Path(sys.executable).parent / "torchrun").is_file()
