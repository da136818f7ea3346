"""Getting an Nsight Systems export open: ``.sqlite``, ``.sqlite.gz``, ``.nsys-rep``.

- ``.sqlite``: opened read-only and immutable (``file:...?mode=ro&immutable=1``): SQLite
  takes no lock and creates no ``-wal``/``-shm``/``-journal`` file beside it, so a read-only
  directory works. An export with a hot WAL or rollback journal beside it is read from a
  private recovered copy instead (``nsys.tmpfiles``). A ``.sqlite`` beside its ``.nsys-rep`` is
  used only while it is complete and not older than the report; else it is exported again.
- ``.sqlite.gz``: inflated to a temporary file within ``--max-decompressed``, removed after.
- ``.nsys-rep`` / ``.qdrep``: exported once with ``nsys export --type sqlite`` to
  ``<report>.sqlite`` beside it (reused while complete and newer than the report). ``nsys``
  is the ``nsys`` argument, else ``$PROFPLUG_NSYS``, else ``nsys`` on PATH.
- Only real tables are read (a VIEW named like a table is ignored, so is a virtual table or
  one with computed columns), and every query runs under a step budget proportional to the
  file size (``guard``): no SQL in the file can make a read run forever.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.blocks import regular_file
from profplug.analyzers.readers.limits import max_decompressed
from profplug.analyzers.readers.nsys.tmpfiles import (
    SQLITE_MAGIC,
    gunzip_sqlite,
    hot_sidecars,
    recovered_copy,
    sigterm_raises,
)

NSYS_ENV = "PROFPLUG_NSYS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2023+ / 2022.x
# A file is an Nsight export if it has StringIds and at least one of these.
NSIGHT_MARKERS = ("META_DATA_EXPORT", "EXPORT_META_DATA", "CUPTI_ACTIVITY_KIND_RUNTIME",
                  "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS", "TARGET_INFO_SESSION_START_TIME")
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_SUFFIXES = (".sqlite", ".sqlite.gz")
# What an export of a CUDA capture always holds; without them it is partial (an interrupted
# export) or from another capture, and gaps would all be charged to "other".
REQUIRED = ("StringIds", "CUPTI_ACTIVITY_KIND_RUNTIME")
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET")
READ_TABLES = frozenset({*REQUIRED, *GPU_TABLES, *META_TABLES, "NVTX_EVENTS", "PROCESSES",
                         "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                         "CUPTI_ACTIVITY_KIND_CUDA_EVENT"})
MTIME_SLACK_S = 2.0  # files written together (a copy, a checkout) are not "older"
STEPS_PER_BYTE = 200  # SQLite VM steps a read may take per byte of the file (~10 needed)
MIN_STEPS = 2_000_000_000
PROGRESS_EVERY = 100_000  # VM steps between two budget checks
MAX_VALUE_BYTES = 1 << 28  # longest string or blob SQLite may build (group_concat blocks)


@dataclass
class Export:
    """An open export: the connection, its tables -> columns, and its version metadata."""

    path: Path  # the file the user named
    conn: sqlite3.Connection
    columns: dict[str, set[str]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    meta_table: str | None = None
    uri: str = ""  # read-only URI of the SQLite file, for extra connections
    warnings: list[str] = field(default_factory=list)
    steps: int = MIN_STEPS  # VM step budget of each connection (see guard)

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


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def export_problem(export: Path, report: Path | None = None) -> str | None:
    """Why ``export`` cannot stand for ``report`` (older, unreadable, partial), else None."""
    try:
        if report is not None and export.stat().st_mtime < report.stat().st_mtime - MTIME_SLACK_S:
            return "older than the report"
        with open(export, "rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return "not a SQLite file"
        conn = sqlite3.connect(f"file:{quote(str(export.resolve()))}?mode=ro&immutable=1",
                               uri=True)
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        return f"unreadable ({exc})"
    missing = [t for t in REQUIRED if t not in tables]
    if not any(t in tables for t in GPU_TABLES):
        missing.append("CUPTI_ACTIVITY_KIND_KERNEL")
    return f"partial (no {', '.join(missing)})" if missing else None


def gz_export(report: Path) -> Path | None:
    """``X.sqlite.gz`` beside the report ``X.nsys-rep`` when there is no plain ``X.sqlite``
    and it is not older than the report (as ``profplug run`` ships a capture)."""
    plain = export_path(report)
    gz = plain.with_name(plain.name + ".gz")
    try:
        if plain.exists() or not gz.is_file():
            return None
        return None if gz.stat().st_mtime < report.stat().st_mtime - MTIME_SLACK_S else gz
    except OSError:
        return None


def _export_report(report: Path, nsys: str | Path | None) -> Path:
    out = export_path(report)
    problem = export_problem(out, report) if out.is_file() else "missing"
    if problem is None:
        return out
    exe = find_nsys(nsys)
    if exe is None:
        force = "" if problem == "missing" else "--force-overwrite true "
        # quoted: a file name with shell syntax must not run anything when pasted
        cmd = (f"nsys export --type sqlite {force}--output {shlex.quote(str(out))} "
               f"{shlex.quote(str(report))}")
        why = "" if problem == "missing" else f"its export {out.name} is {problem}; "
        given = (f"--nsys {nsys}" if nsys else f"${NSYS_ENV}={os.environ.get(NSYS_ENV)}"
                 if os.environ.get(NSYS_ENV) else None)
        where = (f"{given}: no such executable to export it" if given is not None else
                 f"nsys not found to export it (use --nsys or ${NSYS_ENV})")
        raise TraceError(f"{report}: {why}{where}; or export it yourself: {cmd}")
    try:
        res = subprocess.run(export_command(exe, report, out), capture_output=True, text=True,
                             timeout=3600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TraceError(f"{report}: nsys export failed ({exc})") from None
    if res.returncode != 0 or not out.is_file():
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TraceError(f"{report}: nsys export failed (exit {res.returncode}: {tail[0]})")
    problem = export_problem(out, report)
    if problem is not None:
        raise TraceError(f"{report}: nsys wrote an export that is {problem}: {out}")
    return out


def twin_report(db: Path) -> Path | None:
    """The ``.nsys-rep`` / ``.qdrep`` this ``.sqlite`` was exported from, if beside it."""
    if not db.name.endswith(".sqlite"):
        return None
    for suf in REPORT_SUFFIXES:
        rep = db.with_name(db.name[: -len(".sqlite")] + suf)
        if rep.is_file():
            return rep
    return None


@contextmanager
def sqlite_file(path: Path, nsys: str | Path | None = None, max_bytes: int | None = None
                ) -> Iterator[Path]:
    """The plain SQLite file behind ``path``; temporary files are removed on exit (SIGTERM
    included). ``max_bytes``: the most a ``.sqlite.gz`` may inflate to (None: the default,
    ``limits.max_decompressed``)."""
    name = path.name.lower()
    if name.endswith(REPORT_SUFFIXES):
        gz = gz_export(path)
        if gz is not None:  # X.nsys-rep named, its X.sqlite.gz beside it: read that
            path, name = gz, gz.name.lower()
    if name.endswith(REPORT_SUFFIXES):
        db = _export_report(path, nsys)
    elif name.endswith(".gz"):
        with sigterm_raises():
            tmp = gunzip_sqlite(path, max_decompressed() if max_bytes is None
                                else max_bytes)
            try:
                yield tmp
            finally:
                tmp.unlink(missing_ok=True)
        return
    else:
        rep = twin_report(path)
        db = _export_report(rep, nsys) if rep is not None else path
    sidecars = hot_sidecars(db)
    if not sidecars:
        yield db
        return
    with sigterm_raises():
        copy = recovered_copy(path, db, sidecars)
        try:
            yield copy
        finally:
            shutil.rmtree(copy.parent, ignore_errors=True)


def sqlite_why(exc: Exception, steps: int) -> str:
    """An SQLite error as a reason; the step budget's abort said plainly."""
    if "interrupted" in str(exc):
        return f"a query took more than {steps:,} SQLite steps, too many for a file this size"
    return str(exc)


def guard(conn: sqlite3.Connection, steps: int) -> None:
    """Bound what any query of ``conn`` may cost: ``steps`` VM steps in all, strings and
    blobs up to MAX_VALUE_BYTES; past either the query fails (a one-line TraceError)."""
    left = [steps]

    def tick() -> int:
        left[0] -= PROGRESS_EVERY
        return 1 if left[0] < 0 else 0

    conn.set_progress_handler(tick, PROGRESS_EVERY)
    if hasattr(conn, "setlimit"):  # Python 3.11+
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.text_factory = text_cell  # bad UTF-8 in a name must not stop the read


def open_export(user_path: Path, db: Path) -> Export:
    """Open ``db`` read-only and check it is an Nsight export; errors name ``user_path``."""
    try:
        size = regular_file(db).st_size
        with open(db, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceError(f"{user_path}: cannot read ({exc.strerror or exc})") from None
    if head != SQLITE_MAGIC:
        raise TraceError(f"{user_path}: not a SQLite file (expected an Nsight Systems export)")
    uri = f"file:{quote(str(db.resolve()))}?mode=ro&immutable=1"
    steps = max(MIN_STEPS, STEPS_PER_BYTE * size)
    try:
        conn = sqlite3.connect(uri, uri=True)
        guard(conn, steps)
        ex = Export(user_path, conn, uri=uri, steps=steps)
        for t, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
            if t not in READ_TABLES:
                ex.columns.setdefault(t, set())  # present (NSIGHT_MARKERS); never read
                continue
            if str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
                ex.warnings.append(f"{t} is a virtual table: ignored")
                continue
            info = list(conn.execute(f"PRAGMA table_xinfo({quote_ident(t)})"))
            if any(r[6] for r in info):  # hidden / computed (GENERATED) columns
                ex.warnings.append(f"{t} has computed columns: ignored")
                continue
            ex.columns[t] = {r[1] for r in info}
    except (sqlite3.Error, ValueError) as exc:  # ValueError: a bad UTF-8 error message
        raise TraceError(f"{user_path}: unreadable SQLite file ({sqlite_why(exc, steps)})"
                         ) from None
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
                raise TraceError(f"{user_path}: unreadable Nsight export "
                                 f"({sqlite_why(exc, steps)})") from None
            break
    return ex


def text_cell(b: bytes) -> str:
    """SQLite TEXT -> str; invalid UTF-8 bytes become U+FFFD."""
    return b.decode("utf-8", errors="replace")
