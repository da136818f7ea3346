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
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from profplug.analyzers.core.errors import (
    ClocksApart,
    ProfplugError,
    ToolMissingError,
    TraceError,
    one_line,
)

T = TypeVar("T")

def failure(name: str, exc: BaseException) -> str:
    """The one warning line of an optional analysis that failed with ``exc``."""
    return one_line(TaskError.of(exc).line(name))


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


# ---------------------------------------------------------------- values that cross processes
# What a worker sends back for one piece of work: its value (:class:`Ok`) or why there is
# none (:class:`TaskError`), never an exception object or a bare string in the value's slot.
TRACE = "trace"  # the reader's TraceError: the file cannot be read (exit 3)
TOOL = "tool"  # a ToolMissingError (exit 4)
CLOCKS = "clocks"  # ClocksApart: ranks on clocks nothing aligns (exit 2)
DECLINED = "declined"  # another ProfplugError: the message is the whole line (exit 2)
FAILED = "failed"  # any other exception: a bug, or a trace shape nobody foresaw

_RAISED: MappingProxyType[str, type[ProfplugError]] = MappingProxyType(
    {TRACE: TraceError, TOOL: ToolMissingError, CLOCKS: ClocksApart, DECLINED: ProfplugError})


@dataclass(frozen=True)
class Ok(Generic[T]):
    """A piece of work's value."""

    value: T


@dataclass(frozen=True)
class TaskError:
    """Why a piece of work has no value: ``kind`` (``TRACE``, ``TOOL``, ``CLOCKS``,
    ``DECLINED`` or ``FAILED``), its one-line ``message`` (for ``FAILED``: the exception's type, message and
    where it was raised), the file it was about (None: not one file's)."""

    kind: str
    message: str
    path: str | None = None

    @classmethod
    def of(cls, exc: BaseException, path: str | None = None) -> TaskError:
        """``exc`` as a value (a ProfplugError's class kept as its ``kind``)."""
        if isinstance(exc, ProfplugError):
            kind = next((k for k, c in _RAISED.items() if type(exc) is c), DECLINED)
            return cls(kind, one_line(exc), path)
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        msg = " ".join(str(exc).split())[:200]
        return cls(FAILED, one_line(f"{type(exc).__name__}: {msg}{where}"), path)

    @classmethod
    def declined(cls, line: str) -> TaskError:
        """An analysis's own one-line reason for having no result."""
        return cls(DECLINED, one_line(line))

    def line(self, label: str) -> str:
        """The one warning line of the analysis ``label`` that failed so (:func:`failure`)."""
        if self.kind != FAILED:
            return self.message
        return f"{label} failed ({self.message}); the report goes without it"

    def error(self) -> ProfplugError:
        """The exception the client raises for it (a reader's error: its exit code)."""
        return _RAISED.get(self.kind, ProfplugError)(self.message)


Outcome = Ok[Any] | TaskError


def guarded(fn: Callable[..., T], *args: Any) -> Ok[T] | TaskError:
    """``Ok(fn(*args))``, or its failure as a :class:`TaskError` (``PROFPLUG_DEBUG=1`` lets an
    exception that is not a ProfplugError through): a part that fails on a worker costs its
    analysis, not the file's read."""
    try:
        return Ok(fn(*args))
    except Exception as exc:  # isolation is the point
        if debug() and not isinstance(exc, ProfplugError):
            raise
        return TaskError.of(exc)
