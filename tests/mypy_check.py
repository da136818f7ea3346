"""One ``mypy --strict`` run over profplug/ and analyzers/ as the package installs, shared by
tests/unit/test_typecheck.py (which reads its errors) and tests/conftest.py (which fills its
cache while a fresh environment compiles torch, so the test's run is incremental).

mypy cannot follow ``[tool.setuptools.package-dir]`` (analyzers/ installs as
``profplug.analyzers``), so it runs on a tree of links laid out as the package installs, with
one planted module of two errors that shows the check sees the tree and can fail.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALLED_AS = "profplug/analyzers"  # analyzers/ in the tree (errors name it back)
PLANTED = "_planted_type_error.py"  # in the tree's profplug/, never in the repository
PLANTED_TEXT = '''"""Two errors the check must report (tests/unit/test_typecheck.py)."""
from profplug.analyzers.core.timeline import Timeline


def rank_of(tl: Timeline) -> str:
    return tl.rank


def untyped(x):
    return x
'''


def installed_tree(into: Path) -> Path:
    """``into``/profplug: links to profplug/'s entries and to analyzers/ as its
    ``analyzers`` (made anew), plus the planted module."""
    pkg = into / "profplug"
    if pkg.exists():
        for entry in pkg.iterdir():
            entry.unlink()
    pkg.mkdir(parents=True, exist_ok=True)
    for entry in (ROOT / "profplug").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    (pkg / "analyzers").symlink_to(ROOT / "analyzers")
    (pkg / PLANTED).write_text(PLANTED_TEXT)
    return into


def run_mypy(home: Path) -> subprocess.CompletedProcess[str]:
    """mypy over the tree in ``home``/tree, its cache in ``home``/cache (a second run is
    incremental); one run at a time (a lock in ``home``)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest worker (a stolen test) waits
        tree = installed_tree(home / "tree")
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
             "--cache-dir", str(home / "cache"), "-p", "profplug"],
            cwd=tree, capture_output=True, text=True, timeout=600)


if __name__ == "__main__":  # tests/conftest.py: fill the cache in HOME, in the background
    run_mypy(Path(sys.argv[1]))
