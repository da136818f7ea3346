"""No library warning reaches the user as a library's text: :func:`own_warnings` wraps a
command; a warning raised inside it (numpy's ``RuntimeWarning``, pandas', ...) becomes one
``profplug: warning:`` line naming where it came from, or nothing when it is a known harmless
one (:data:`HARMLESS`: its cause is understood and its value unused). ``PROFPLUG_DEBUG=1``
shows every warning as Python prints it.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
ROOT = Path(__file__).resolve().parent

# (file under analyzers/, message start): known harmless, not shown.
HARMLESS = (
    # whatif/predicted_timeline.py `rescaled_ns`: the float64 branch is computed for every
    # element, also where the denominator is 0 (0 * inf = NaN), and np.where then takes the
    # exact int64 branch there: the NaN never reaches a result.
    ("whatif/predicted_timeline.py", "invalid value encountered in cast"),
)


def _where(filename: str) -> str:
    try:
        return str(Path(filename).resolve().relative_to(ROOT))
    except ValueError:
        return Path(filename).name


def line_for(w: warnings.WarningMessage) -> str | None:
    """The user's line for one caught warning; None when it is known harmless."""
    where = _where(w.filename)
    msg = str(w.message).splitlines()[0] if str(w.message) else w.category.__name__
    if any(where == f and msg.startswith(m) for f, m in HARMLESS):
        return None
    return f"profplug: warning: {w.category.__name__} in {where}:{w.lineno}: {msg}"


def own_warnings(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` with warnings caught; print each distinct one as our own line (stderr)."""
    @functools.wraps(fn)
    def run(*args: P.args, **kw: P.kwargs) -> R:
        if os.environ.get("PROFPLUG_DEBUG") == "1":
            return fn(*args, **kw)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return fn(*args, **kw)
            finally:
                seen: set[str] = set()
                for w in caught:
                    line = line_for(w)
                    if line is not None and line not in seen:
                        seen.add(line)
                        print(line, file=sys.stderr)
    return run
