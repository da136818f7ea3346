"""Turning user paths (files, directories) into one Timeline per rank, in parallel."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..errors import TraceError
from .readers import reader_for
from .readers.jsonblocks import kind_of
from .timeline import Timeline

SKIP_NAMES = ("run.json",)


def _run_artifact(f: Path) -> bool:
    """Files ``profplug run`` writes beside the traces: run.json and per-rank status/*.json."""
    if f.name in SKIP_NAMES:
        return True
    return f.parent.name == "status" and (f.parent.parent / "run.json").is_file()


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories (recursively) into the trace files they hold, in name order.

    A directory holding ``x.nsys-rep`` and its export ``x.sqlite``/``x.sqlite.gz`` yields
    the export only, so the report is read once.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and reader_for(f)
                           and not _run_artifact(f))
            out.extend(_drop_unexported_twins(found))
            if not found:
                raise TraceError(f"{p}: no trace files (.json, .json.gz, .sqlite, .nsys-rep)")
        elif p.is_file():
            if reader_for(p) is None:
                raise TraceError(f"{p}: unknown trace format (expected .json, .json.gz, "
                                 ".sqlite, .sqlite.gz or .nsys-rep)")
            out.append(p)
        elif p.exists():  # a FIFO would block the reader, a device never ends
            raise TraceError(f"{p}: not a regular file ({kind_of(p.stat().st_mode)})")
        else:
            raise TraceError(f"{p}: no such file or directory")
    return out


def _drop_unexported_twins(files: list[Path]) -> list[Path]:
    def stem(f: Path) -> str:
        n = f.name
        for suf in (".nsys-rep", ".qdrep", ".sqlite.gz", ".sqlite"):
            if n.endswith(suf):
                return str(f.parent / n[: -len(suf)])
        return ""

    exported = {stem(f) for f in files if f.name.endswith((".sqlite", ".sqlite.gz"))}
    plain = {stem(f) for f in files if f.name.endswith(".sqlite")}
    return [f for f in files
            if not (f.name.endswith((".nsys-rep", ".qdrep")) and stem(f) in exported)
            and not (f.name.endswith(".sqlite.gz") and stem(f) in plain)]


def _read_one(args: tuple[Path, int]) -> list[Timeline]:
    path, index = args
    reader = reader_for(path)
    assert reader is not None  # trace_files only yields readable names
    return reader(path, index)


def load_timelines(paths: Iterable[str | Path], *, jobs: int | None = None,
                   progress: bool | None = None) -> list[Timeline]:
    """Read every trace under ``paths``; one Timeline per rank, sorted by rank.

    Files are parsed in parallel on up to ``jobs`` processes (default: all cores).
    Raises TraceError when two files claim the same rank.
    """
    files = trace_files(paths)
    work = [(f, i) for i, f in enumerate(files)]
    n_jobs = min(len(work), jobs or os.cpu_count() or 1)
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
    timelines = [t for r in results for t in r]
    _check_unique_ranks(timelines)
    return sorted(timelines, key=lambda t: t.rank)


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
