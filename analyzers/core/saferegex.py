"""``--step-range re:REGEX`` matched against the trace's names in bounded time.

The regex is the user's, the names are the trace's: ``re:(a+)+$`` on a 34-character name
backtracks for ever in Python's ``re``. With ``google-re2`` installed (the ``re2`` extra), the
names are matched by RE2, linear in the name. Without it, or for a pattern RE2 does not
support (back-references, look-around), ``re`` runs in a forked child process under a time
budget (``BUDGET_S`` per trace); past it, a one-line error says so.
"""

from __future__ import annotations

import multiprocessing as mp
import re
from collections.abc import Callable
from typing import Any

from profplug.analyzers.core.errors import ProfplugError

BUDGET_S = 10.0  # for all the names of one trace
Matches = list[tuple[int, str | None]]  # (name index, the first group or None)

try:  # optional: linear-time matching
    import re2 as _re2
except ImportError:  # pragma: no cover - depends on the environment
    _re2 = None


def _re2_compile(pattern: str) -> Any | None:
    if _re2 is None:
        return None
    opts = _re2.Options()
    opts.log_errors = False
    try:
        return _re2.compile(pattern, opts)
    except Exception:  # re2.error: a pattern RE2 lacks (back-references): re is used
        return None


def _scan(rx: Any, names: list[str]) -> Matches:
    out: Matches = []
    for i, n in enumerate(names):
        m = rx.search(n)
        if m is not None:
            out.append((i, m.group(1) if rx.groups else None))
    return out


def _scan_re(pattern: str, names: list[str]) -> Matches:
    return _scan(re.compile(pattern), names)


def search_all(pattern: str, names: list[str], budget_s: float = BUDGET_S,
               scan_re: Callable[[str, list[str]], Matches] = _scan_re) -> Matches:
    """(index, first group) of every name ``pattern`` finds a match in, in bounded time."""
    rx = _re2_compile(pattern)
    if rx is not None:
        return _scan(rx, names)
    if not names:
        return []
    with mp.get_context("fork").Pool(1) as pool:
        job = pool.apply_async(scan_re, (pattern, names))
        try:
            return job.get(budget_s)
        except mp.TimeoutError:
            pool.terminate()
            raise ProfplugError(
                f"--step-range re:{pattern}: matching the trace's names took over "
                f"{budget_s:g} s (catastrophic backtracking?); simplify the regex, or install "
                "google-re2 (pip install 'profplug[re2]') to match in linear time") from None
