"""Optional analyses are isolated: a failure in one becomes one warning line, not a crash.

The optional analyses of a report are the what-if, the cross-rank analysis and the call
sites. The stall attribution and its sum rule are the report; an optional analysis adds to
it. When one fails on input the rest of the report handles (any exception: a bug, a trace
shape nobody foresaw), the report is printed without it and with one warning line naming
it, the exception and where it was raised. A ``ProfplugError`` is an analysis declining
with its own message (say, the what-if of a run too big to replay by default): that
message is the warning. ``PROFPLUG_DEBUG=1`` lets the exception through (a traceback, for
a bug report).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from profplug.analyzers.core.errors import ProfplugError, one_line

T = TypeVar("T")

# Known run-level analyzers by their function's name (a closure: its factory's name).
_LABELS = {"whatif_if_cheap": "what-if", "whatif_analysis": "what-if", "whatif": "what-if",
           "cross_rank_analysis": "cross-rank analysis", "cross_rank": "cross-rank analysis"}


def label(analysis: Callable[..., Any]) -> str:
    """The name a warning gives a run-level analyzer: its ``label`` attribute, else a known
    function name (``whatif_if_cheap`` -> ``what-if``), else its function's name."""
    given = getattr(analysis, "label", None)
    if isinstance(given, str):
        return given
    name = str(getattr(analysis, "__qualname__", type(analysis).__name__))
    name = name.split(".<locals>")[0]
    return _LABELS.get(name, name)


def failure(name: str, exc: BaseException) -> str:
    """The one warning line of an optional analysis that failed with ``exc``."""
    if isinstance(exc, ProfplugError):
        return one_line(exc)
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}"
    msg = " ".join(str(exc).split())[:200]
    return one_line(f"{name} failed ({type(exc).__name__}: {msg}{where}); the report goes "
                    "without it")


def debug() -> bool:
    return os.environ.get("PROFPLUG_DEBUG", "") not in ("", "0")


def isolated(name: str, fn: Callable[..., T], *args: Any, **kwargs: Any
             ) -> tuple[T | None, str | None]:
    """``(fn(*args, **kwargs), None)``, or ``(None, warning)`` when it raised (see the
    module docstring). KeyboardInterrupt and SystemExit are not caught."""
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # isolation is the point
        if debug() and not isinstance(exc, ProfplugError):
            raise
        return None, failure(name, exc)
