"""Temporary SQLite files for the Nsight reader: an inflated ``.sqlite.gz``, or a private copy
of an export that has a hot WAL or rollback journal beside it.

- Checked early: a ``.gz`` must inflate to the SQLite magic before anything is written, the
  size its header announces must fit the ``--max-decompressed`` budget and the free space of
  the temporary directory, and the budget is enforced while inflating (``readers.blocks``).
- Removed on every exit: normal, error, and SIGTERM (while a temporary file exists, SIGTERM
  raises ``SystemExit(143)`` in the main thread, so ``finally`` clauses run).
- The user's export is never written to: SQLite replays a WAL or rolls back a journal in the
  private copy, which is then read like any other export.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.blocks import Blocks
from profplug.analyzers.readers.limits import human, too_big

SQLITE_MAGIC = b"SQLite format 3\x00"
SIDECARS = ("-wal", "-journal")


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside: SIGTERM raises SystemExit(143) (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # pragma: no cover - not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def announced_size(head: bytes) -> int | None:
    """The database size a SQLite header announces (page size x page count), if valid."""
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return None
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]  # "in-header database size" is valid
    return page * pages if valid and pages else None


def _check_room(path: Path, need: int, limit: int | None, tmpdir: str) -> None:
    if limit is not None and need > limit:
        raise too_big(path, limit)
    free = shutil.disk_usage(tmpdir).free
    if need > free:
        raise TraceError(f"{path}: needs {human(need)} in {tmpdir} to unpack, only "
                         f"{human(free)} free (set TMPDIR to a larger disk)")


def gunzip_sqlite(path: Path, limit: int) -> Path:
    """Inflate a ``.sqlite.gz`` to a new temporary file; the caller removes it."""
    blocks = Blocks(path, limit)
    it = iter(blocks)
    head = b""
    for block in it:
        head += bytes(block)
        if len(head) >= 100:
            break
    if not blocks.gz:
        raise TraceError(f"{path}: corrupt or truncated gzip (not a gzip file)")
    if not head.startswith(SQLITE_MAGIC):
        raise TraceError(f"{path}: not a SQLite file (expected an Nsight Systems export)")
    tmpdir = tempfile.gettempdir()
    _check_room(path, announced_size(head) or len(head), limit, tmpdir)
    fd, tmp = tempfile.mkstemp(prefix="profplug-", suffix=".sqlite")
    try:
        with os.fdopen(fd, "wb") as dst:
            dst.write(head)
            for block in it:
                dst.write(block)
        if blocks.note:
            raise TraceError(f"{path}: {blocks.note}")
    except OSError as exc:
        os.unlink(tmp)
        raise TraceError(f"{path}: cannot unpack to {tmpdir} ({exc.strerror or exc})") from None
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp)


def hot_sidecars(db: Path) -> list[Path]:
    """The non-empty ``-wal`` / ``-journal`` files beside ``db`` (uncheckpointed or
    uncommitted changes: reading ``db`` alone would give stale or half-written data)."""
    out = []
    for suffix in SIDECARS:
        side = db.with_name(db.name + suffix)
        try:
            if side.is_file() and side.stat().st_size > 0:
                out.append(side)
        except OSError:
            continue
    return out


def recovered_copy(user_path: Path, db: Path, sidecars: list[Path]) -> Path:
    """Copy ``db`` and its sidecars into a new temporary directory and let SQLite replay
    the WAL / roll back the journal there; returns the copy (the caller removes its dir)."""
    need = db.stat().st_size + sum(s.stat().st_size for s in sidecars)
    tmpdir = tempfile.gettempdir()
    _check_room(user_path, need, None, tmpdir)
    d = Path(tempfile.mkdtemp(prefix="profplug-"))
    copy = d / "export.sqlite"
    try:
        shutil.copyfile(db, copy)
        for s in sidecars:
            shutil.copyfile(s, d / ("export.sqlite" + s.name[len(db.name):]))
        conn = sqlite3.connect(copy)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        shutil.rmtree(d, ignore_errors=True)
        raise TraceError(f"{user_path}: cannot recover its "
                         f"{'/'.join(s.name[len(db.name):] for s in sidecars)} file in a "
                         f"private copy ({exc})") from None
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    return copy
