"""The exit status a rank asked for: ``sys.exit(n)`` (argparse's errors, a job's own exit
codes) and the ``exit``/``quit`` builtins, recorded on the session's
:class:`~profplug.session.statusfile.ProcessEnd` before they raise.

Python gives atexit handlers no way to learn the status of a ``SystemExit`` that is ending
the process, so the calls that raise it are wrapped instead. Not seen: ``raise
SystemExit(n)`` written out (``profplug run`` still knows the status of a job that is a
single process) and ``os._exit`` (nothing runs after it). A ``sys.exit`` whose
``SystemExit`` the job catches and survives is recorded all the same, until a later one.
"""

from __future__ import annotations

import builtins
import functools
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from profplug.session.statusfile import ProcessEnd

_installed: list[tuple[Any, str, Any]] = []


def status_of(code: object) -> int:
    """The process status Python derives from ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    return 1  # a message: printed to stderr, status 1


class _Quitter:
    """Stands in for the ``exit``/``quit`` builtins (keeps their repr)."""

    def __init__(self, original: Any, record: Callable[[object], None]) -> None:
        self._original = original
        self._record = record

    def __repr__(self) -> str:
        return repr(self._original)

    def __call__(self, code: object = None) -> None:
        self._record(code)
        self._original(code)


def install(end: ProcessEnd) -> None:
    """Record the status of ``sys.exit``/``exit``/``quit`` calls on the main thread as
    ``end.exit_code`` (in a thread, ``sys.exit`` only ends that thread)."""
    if _installed:
        return

    def record(code: object) -> None:
        if threading.current_thread() is threading.main_thread():
            end.exit_code = status_of(code)

    original_exit = sys.exit

    @functools.wraps(original_exit)
    def exit(status: str | int | None = None) -> NoReturn:
        record(status)
        original_exit(status)

    _installed.append((sys, "exit", original_exit))
    sys.exit = exit
    for name in ("exit", "quit"):
        original = getattr(builtins, name, None)
        if original is not None:  # absent under python -S
            _installed.append((builtins, name, original))
            setattr(builtins, name, _Quitter(original, record))


def uninstall() -> None:
    while _installed:
        owner, name, original = _installed.pop()
        setattr(owner, name, original)
