"""Turning user paths (files, directories) into one Timeline per rank, in parallel."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from ..errors import TraceError, one_line
from .cpus import usable_cpus
from .readers.base import ReadOptions
from .readers.jsonblocks import kind_of
from .readers.limits import max_decompressed
from .readers.nsys_source import EXPORT_SUFFIXES, REPORT_SUFFIXES
from .readers.registry import SUFFIXES, reader_for
from .timeline import Timeline

SKIP_NAMES = ("run.json", "ab.json")  # what profplug run / profplug ab write beside traces
# What the Python API takes as "paths": one path (str or Path) or several.
PathsLike = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
KNOWN_SUFFIXES = f"{', '.join(SUFFIXES[:-1])} or {SUFFIXES[-1]}"  # for error messages


def as_paths(paths: PathsLike) -> list[Path]:
    """One path or several, as a list: a str is one path, never a sequence of characters."""
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def _run_artifact(f: Path) -> bool:
    """Files profplug writes beside the traces: ``run.json`` and per-rank ``status/*.json``
    (``profplug run``), ``ab.json`` (``profplug ab``, whose traced what-if run may sit in the
    same folder)."""
    if f.name in SKIP_NAMES:
        return True
    return f.parent.name == "status" and (f.parent.parent / "run.json").is_file()


def trace_files(paths: PathsLike, skipped: list[str] | None = None) -> list[Path]:
    """Expand directories (recursively) into the trace files they hold, in name order.

    A directory holding ``x.nsys-rep`` and its export ``x.sqlite``/``x.sqlite.gz`` yields
    the export only, so the report is read once. Entries of a directory that are skipped
    although they might hold a rank (a subdirectory that cannot be listed; a FIFO, device
    or dangling link named like a trace) are added to ``skipped``, one line each.
    """
    out: list[Path] = []
    for p in as_paths(paths):
        if p.is_dir():
            found = _walk(p, [] if skipped is None else skipped)
            out.extend(_drop_unexported_twins(found))
            if not found:
                raise TraceError(f"{p}: no trace files ({KNOWN_SUFFIXES})")
        elif p.is_file():
            if reader_for(p) is None:
                raise TraceError(f"{p}: unknown trace format (expected {KNOWN_SUFFIXES})")
            out.append(p)
        elif p.exists():  # a FIFO would block the reader, a device never ends
            raise TraceError(f"{p}: not a regular file ({kind_of(p.stat().st_mode)})")
        else:
            raise TraceError(f"{p}: no such file or directory")
    return out


def _walk(top: Path, skipped: list[str]) -> list[Path]:
    """The trace files under ``top`` (``os.walk``: ``Path.rglob`` silently skips a directory
    it cannot list on Python 3.11); what might have been a rank and was skipped, and why,
    goes to ``skipped``."""
    found: list[Path] = []

    def unlisted(exc: OSError) -> None:
        if Path(exc.filename or top) == top:  # the directory given: nothing to read
            raise TraceError(f"{top}: cannot list it ({exc.strerror or exc})")
        skipped.append(f"{one_line(exc.filename)}: cannot list it ({exc.strerror or exc})")

    for d, _, names in os.walk(top, onerror=unlisted):
        for name in names:
            f = Path(d, name)
            if not reader_for(f) or _run_artifact(f):
                continue
            if f.is_file():
                found.append(f)
                continue
            try:
                why = kind_of(f.stat().st_mode)
            except OSError:
                why = "a dangling link" if f.is_symlink() else "unreadable"
            skipped.append(f"{one_line(f)}: {why}, not a trace file")
    return sorted(found)


def _drop_unexported_twins(files: list[Path]) -> list[Path]:
    """Nsight: a report whose export is there too, and a ``.sqlite.gz`` beside its
    ``.sqlite``, are the same trace: keep the export (the plain one)."""
    plain_export, gz_export = EXPORT_SUFFIXES

    def stem(f: Path) -> str:
        n = f.name
        for suf in (*REPORT_SUFFIXES, gz_export, plain_export):
            if n.endswith(suf):
                return str(f.parent / n[: -len(suf)])
        return ""

    exported = {stem(f) for f in files if f.name.endswith(EXPORT_SUFFIXES)}
    plain = {stem(f) for f in files if f.name.endswith(plain_export)}
    return [f for f in files
            if not (f.name.endswith(REPORT_SUFFIXES) and stem(f) in exported)
            and not (f.name.endswith(gz_export) and stem(f) in plain)]


def _read_one(args: tuple[Path, int, ReadOptions]) -> list[Timeline]:
    path, index, options = args
    reader = reader_for(path)
    if reader is None:  # trace_files only yields readable names
        raise TraceError(f"{path}: unknown trace format (expected {KNOWN_SUFFIXES})")
    return reader.read(path, index, options)


def load_timelines(paths: PathsLike, *, jobs: int | None = None,
                   progress: bool | None = None, read: ReadOptions | None = None
                   ) -> list[Timeline]:
    """Read every trace under ``paths`` (one path or several); one Timeline per rank, sorted
    by rank.

    Files are parsed in parallel on up to ``jobs`` processes (default: the usable CPUs).
    ``read`` goes to every reader (its ``max_decompressed`` default, from
    ``$PROFPLUG_MAX_DECOMPRESSED``, is settled here, once). Raises TraceError when two files
    claim the same rank.
    """
    skipped: list[str] = []
    files = trace_files(paths, skipped)
    opt = read or ReadOptions()
    if opt.max_decompressed is None:
        opt = replace(opt, max_decompressed=max_decompressed())
    work = [(f, i, opt) for i, f in enumerate(files)]
    n_jobs = min(len(work), jobs or usable_cpus())
    show = sys.stderr.isatty() if progress is None else progress
    results: list[list[Timeline]] = []
    if n_jobs <= 1:
        for w in work:
            results.append(_read_one(w))
            _tick(show, len(results), len(work))
    else:
        with ProcessPoolExecutor(max_workers=n_jobs) as pool:
            for r in pool.map(_read_one, work):
                results.append(r)
                _tick(show, len(results), len(work))
    if show:
        print(file=sys.stderr)
    timelines = sorted((t for r in results for t in r), key=lambda t: t.rank)
    _check_unique_ranks(timelines)
    if skipped and timelines:  # a rank may be missing: a warning (--strict exits 1)
        timelines[0].warnings.append(f"{len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'}"
                                     f" skipped (a rank may be missing): {'; '.join(skipped)}")
    return timelines


def _tick(show: bool, done: int, total: int) -> None:
    if show:
        bar = "#" * (30 * done // max(total, 1))
        print(f"\rreading traces [{bar:<30}] {done}/{total}", end="", file=sys.stderr)


def _check_unique_ranks(timelines: list[Timeline]) -> None:
    seen: dict[int, Timeline] = {}
    for t in timelines:
        if t.rank in seen:
            a, b = seen[t.rank], t
            raise TraceError(f"rank {t.rank} appears twice: {', '.join(a.files)} and "
                             f"{', '.join(b.files)}")
        seen[t.rank] = t
