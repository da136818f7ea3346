"""Every file profplug writes, written whole or not at all.

A file is written into a temporary file in its own folder (same file system: the rename is
atomic), flushed to disk (``fsync``), and renamed over the target. A reader, a concurrent
writer, a full disk or an error part-way sees the old file or the new one, never a part of
either; on a failure the temporary is removed and the old file is left as it was.

SIGINT and SIGTERM are held back (:func:`signals_held`) from the moment the temporary exists
until it is renamed or removed: a Ctrl-C or a ``kill`` then acts right after, on a finished
target with no temporary left. A write that takes long therefore delays a signal by as long;
the files profplug writes take seconds at most.

An output the user named that is not a regular file (``-o /dev/null``, ``-o >(gzip >
x.gz)``'s pipe, a terminal) is written into directly (``into_special``): renaming over it
would replace the device node. Any other writer (a cache entry) replaces whatever is there,
a FIFO planted under its name included: it never opens one. A symbolic link is followed
(its target is replaced, the link stays); a hard link is broken: the other name keeps the
old bytes, which is what a user who copied a report by ``ln`` expects.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from profplug.analyzers.core.errors import ProfplugError, one_line

TMP_PREFIX = ".profplug-tmp-"  # every temporary starts so (tests look for leftovers by it)
HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back while inside; each one that came is sent again on
    leaving, to the handler that was there before (so SIGTERM still ends the process, and
    SIGINT still raises KeyboardInterrupt, once the file is whole).

    In the main thread by noting them in a handler of our own: a signal sent to the
    process may be delivered to any of its threads (a BLAS pool's), and only a handler, run
    by the main thread, catches it wherever it lands. Elsewhere (a handler can only be set
    from the main thread) by blocking them in this thread (``pthread_sigmask``)."""
    if threading.current_thread() is not threading.main_thread():
        with _blocked():
            yield
        return
    came: list[int] = []
    before = {s: signal.getsignal(s) for s in HELD_SIGNALS}
    for s in HELD_SIGNALS:
        signal.signal(s, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(came):
            os.kill(os.getpid(), signum)


@contextlib.contextmanager
def _blocked() -> Iterator[None]:
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    except (AttributeError, OSError, ValueError):  # a platform without it: not held
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _special(path: Path) -> bool:
    """An existing target that is not a regular file (a device, FIFO, socket)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _mode(path: Path) -> int:
    """The permission bits of the file replaced, else those a new file gets (umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object],
                 into_special: bool = False) -> None:
    """``write(file)`` into a temporary beside ``path``, fsync, rename over ``path`` (see the
    module's docstring). Raises the OSError of a failed write, after removing the
    temporary; the old ``path`` is untouched. ``into_special``: a ``path`` that is a device
    or a pipe is written into (an output the user named), not replaced."""
    target = Path(path)
    if into_special and _special(target):
        with open(target, "wb") as fh:
            write(fh)
        return
    target = Path(os.path.realpath(target))  # a symbolic link: replace what it points to
    mode = _mode(target)
    with signals_held():
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TMP_PREFIX,
                                   suffix="-" + target.name[-40:])
        try:
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    _fsync_dir(target.parent)


def replace_bytes(path: str | os.PathLike[str], data: bytes, into_special: bool = False
                  ) -> None:
    """``path`` holds ``data``, whole (:func:`write_atomic`)."""
    write_atomic(path, lambda fh: fh.write(data), into_special)


def replace_text(path: str | os.PathLike[str], text: str, into_special: bool = False) -> None:
    """``path`` holds ``text`` (UTF-8), whole (:func:`write_atomic`)."""
    replace_bytes(path, text.encode("utf-8"), into_special)


def write_output(path: str | os.PathLike[str], text: str) -> None:
    """An output the user asked for: :func:`replace_text`, a failure as one line
    (ProfplugError) that says the old file, if any, is as it was."""
    try:
        replace_text(path, text, into_special=True)
    except OSError as exc:
        kept = " (the file there is unchanged)" if os.path.lexists(path) else ""
        raise ProfplugError(f"{one_line(path)}: cannot write ({exc.strerror or exc}){kept}"
                            ) from None
