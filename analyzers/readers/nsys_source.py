"""Getting an Nsight Systems export open: ``.sqlite``, ``.sqlite.gz``, ``.nsys-rep``.

- ``.sqlite``: opened read-only (``file:...?mode=ro``).
- ``.sqlite.gz``: inflated to a temporary file, deleted when reading is done.
- ``.nsys-rep`` / ``.qdrep``: exported once with ``nsys export --type sqlite`` to
  ``<report>.sqlite`` beside it (reused while newer than the report). ``nsys`` is the
  ``nsys`` argument, else ``$PROFPLUG_NSYS``, else ``nsys`` on PATH.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ...errors import TraceError

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_ENV = "PROFPLUG_NSYS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2023+ / 2022.x
# A file is an Nsight export if it has StringIds and at least one of these.
NSIGHT_MARKERS = ("META_DATA_EXPORT", "EXPORT_META_DATA", "CUPTI_ACTIVITY_KIND_RUNTIME",
                  "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS", "TARGET_INFO_SESSION_START_TIME")
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_SUFFIXES = (".sqlite", ".sqlite.gz")


@dataclass
class Export:
    """An open export: the connection, its tables -> columns, and its version metadata."""

    path: Path  # the file the user named
    conn: sqlite3.Connection
    columns: dict[str, set[str]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    meta_table: str | None = None
    uri: str = ""  # read-only URI of the SQLite file, for extra connections

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.columns.get(table)
        return cols is not None and (column is None or column in cols)

    @property
    def schema_version(self) -> str:
        return self.meta.get("EXPORT_SCHEMA_VERSION", "unknown")


def find_nsys(nsys: str | Path | None = None) -> str | None:
    """The nsys executable: the argument, else $PROFPLUG_NSYS, else PATH; None if absent."""
    cand = str(nsys) if nsys else os.environ.get(NSYS_ENV) or "nsys"
    return shutil.which(cand) or (cand if Path(cand).is_file() and os.access(cand, os.X_OK)
                                  else None)


def export_path(report: Path) -> Path:
    n = report.name
    for suf in REPORT_SUFFIXES:
        if n.endswith(suf):
            return report.with_name(n[: -len(suf)] + ".sqlite")
    return report.with_name(n + ".sqlite")


def export_command(nsys: str, report: Path, out: Path) -> list[str]:
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
            "--output", str(out), str(report)]


def _export_report(report: Path, nsys: str | Path | None) -> Path:
    out = export_path(report)
    try:
        if out.is_file() and out.stat().st_mtime >= report.stat().st_mtime:
            return out
    except OSError:
        pass
    exe = find_nsys(nsys)
    if exe is None:
        cmd = f"nsys export --type sqlite --output {out} {report}"
        raise TraceError(f"{report}: nsys not found (set {NSYS_ENV} or put nsys on PATH); "
                         f"export it yourself with: {cmd}")
    try:
        res = subprocess.run(export_command(exe, report, out), capture_output=True, text=True,
                             timeout=3600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TraceError(f"{report}: nsys export failed ({exc})") from None
    if res.returncode != 0 or not out.is_file():
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TraceError(f"{report}: nsys export failed (exit {res.returncode}: {tail[0]})")
    return out


def _gunzip(path: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix="profplug-", suffix=".sqlite")
    try:
        with os.fdopen(fd, "wb") as dst, gzip.open(path, "rb") as src:
            shutil.copyfileobj(src, dst, 1 << 22)
    except (OSError, EOFError, zlib.error) as exc:
        os.unlink(tmp)
        raise TraceError(f"{path}: corrupt or truncated gzip ({exc})") from None
    return Path(tmp)


@contextmanager
def sqlite_file(path: Path, nsys: str | Path | None = None) -> Iterator[Path]:
    """The plain SQLite file behind ``path`` (temporary for ``.gz``, removed on exit)."""
    name = path.name.lower()
    if name.endswith(REPORT_SUFFIXES):
        yield _export_report(path, nsys)
    elif name.endswith(".gz"):
        tmp = _gunzip(path)
        try:
            yield tmp
        finally:
            tmp.unlink(missing_ok=True)
    else:
        yield path


def open_export(user_path: Path, db: Path) -> Export:
    """Open ``db`` read-only and check it is an Nsight export; errors name ``user_path``."""
    try:
        with open(db, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceError(f"{user_path}: cannot read ({exc.strerror or exc})") from None
    if head != SQLITE_MAGIC:
        raise TraceError(f"{user_path}: not a SQLite file (expected an Nsight Systems export)")
    uri = f"file:{quote(str(db.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.text_factory = text_cell  # bad UTF-8 in a name must not stop the read
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        ex = Export(user_path, conn, uri=uri)
        for t in tables:
            ex.columns[t] = {r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')}
    except (sqlite3.Error, ValueError) as exc:  # ValueError: a bad UTF-8 error message
        raise TraceError(f"{user_path}: unreadable SQLite file ({exc})") from None
    if "StringIds" not in ex.columns or not any(t in ex.columns for t in NSIGHT_MARKERS):
        conn.close()
        raise TraceError(f"{user_path}: SQLite file is not an Nsight Systems export "
                         "(no StringIds / CUPTI / NVTX tables)")
    for t in META_TABLES:
        if ex.has(t, "name") and ex.has(t, "value"):
            ex.meta_table = t
            try:
                ex.meta = {str(k): str(v) for k, v in
                           conn.execute(f"SELECT name, value FROM {t}")}
            except (sqlite3.Error, ValueError) as exc:
                conn.close()
                raise TraceError(f"{user_path}: unreadable Nsight export ({exc})") from None
            break
    return ex


def text_cell(b: bytes) -> str:
    """SQLite TEXT -> str; invalid UTF-8 bytes become U+FFFD."""
    return b.decode("utf-8", errors="replace")
