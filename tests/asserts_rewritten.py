"""The suite's test modules, assertion-rewritten once, before pytest-xdist's workers start.

pytest rewrites each test module's ``assert`` statements on import and caches the result
beside it (``__pycache__/<name>.<tag>-pytest-<version>.pyc``, checked against the source's
hash when read). In a fresh clone every worker finds no cache and rewrites the whole suite
itself, the workers side by side; tests/conftest.py runs :func:`rewrite_all` in its warm-up
instead, so the workers read what it wrote.

It calls pytest's own rewriter (``_pytest.assertion.rewrite``, not a public API) with no
config, as the workers do under this project's settings (``enable_assertion_pass_hook`` is
off). Whatever it writes, pytest reads only a cache that is complete and matches the source
(a failed or stale one is rewritten by the worker), so where that API has changed this writes
nothing and the workers rewrite as they would without it.
"""

from __future__ import annotations

import types
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def rewrite_all(root: Path = TESTS) -> int:
    """Rewrite every ``test_*.py`` and ``conftest.py`` under ``root`` that has no cache yet;
    the number written (0 where pytest's rewriter is not the one this was written for)."""
    try:
        from _pytest.assertion import rewrite
        write_pyc, rewrite_test = rewrite._write_pyc, rewrite._rewrite_test
        cache_dir, tail = rewrite.get_cache_dir, rewrite.PYC_TAIL
    except (ImportError, AttributeError):
        return 0
    state = types.SimpleNamespace(trace=lambda *_: None)  # write_pyc traces its errors only
    written = 0
    for fn in sorted([*root.rglob("test_*.py"), *root.rglob("conftest.py")]):
        pyc = cache_dir(fn) / (fn.name[:-3] + tail)
        if pyc.exists():
            continue
        try:
            source_hash, code = rewrite_test(fn, None)
            pyc.parent.mkdir(parents=True, exist_ok=True)
            written += bool(write_pyc(state, code, source_hash, pyc))
        except Exception:  # a file that does not parse, an API that changed: the worker's turn
            continue
    return written


if __name__ == "__main__":
    rewrite_all()
