"""Turning user paths (files, directories) into one Timeline per rank, in parallel."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from profplug.analyzers.core.analysis_spec import PartFn
from profplug.analyzers.core.errors import TraceError, one_line
from profplug.analyzers.core.optional import Outcome
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.readers.blocks import kind_of
from profplug.analyzers.readers.cache import is_cache_dir, unusable
from profplug.analyzers.readers.limits import max_decompressed
from profplug.analyzers.readers.nsys.source import EXPORT_SUFFIXES, REPORT_SUFFIXES
from profplug.analyzers.readers.registry import SUFFIXES, reader_for
from profplug.analyzers.scale.dispatch import (
    Backend,
    FileResult,
    LocalBackend,
    RankTask,
    TaskStep,
    gather,
)
from profplug.analyzers.scale.pathargs import PathsLike, as_paths
from profplug.analyzers.scale.progress import Progress
from profplug.analyzers.stalls.rank import RankResult, StallOptions
from profplug.analyzers.steps.rule import check_matched

SKIP_NAMES = ("run.json", "ab.json")  # what profplug run / profplug ab write beside traces
KNOWN_SUFFIXES = f"{', '.join(SUFFIXES[:-1])} or {SUFFIXES[-1]}"  # for error messages


def _run_artifact(f: Path) -> bool:
    """Files profplug writes beside the traces: ``run.json`` and per-rank ``status/*.json``
    (``profplug run``), ``ab.json`` (``profplug ab``, whose traced what-if run may sit in the
    same folder)."""
    if f.name in SKIP_NAMES:
        return True
    return f.parent.name == "status" and (f.parent.parent / "run.json").is_file()


def trace_files(paths: PathsLike, skipped: list[str] | None = None,
                cache_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Expand directories (recursively) into the trace files they hold, in name order.

    A folder that is a profplug cache (``cache_dir``, the one in use, or any tagged as a
    cache: ``readers.cache.mark``) is not searched: its entries are not traces.

    A directory holding ``x.nsys-rep`` and its export ``x.sqlite``/``x.sqlite.gz`` yields
    the export only, so the report is read once; so do both named, and a file named twice
    (or through a link) is read once. Entries of a directory that are skipped
    although they might hold a rank (a subdirectory that cannot be listed; a FIFO, device
    or dangling link named like a trace) are added to ``skipped``, one line each.
    """
    out: list[Path] = []
    in_use = None if cache_dir is None else os.path.realpath(cache_dir)
    for p in as_paths(paths):
        if p.is_dir():
            found = _walk(p, [] if skipped is None else skipped, in_use)
            out.extend(_drop_unexported_twins(found))
            if not found and (p / "ab.json").is_file():
                raise TraceError(f"{p}: an ab directory (ab.json, no trace): use `profplug "
                                 f"ab-report {shlex.quote(str(p))}`")
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
    return _drop_unexported_twins(_once(out))


def _once(files: list[Path]) -> list[Path]:
    """Each file once, at its first mention: ``f d/./f``, ``DIR DIR/f``, a link or a hard
    link to a file named before are one trace, not two ranks (by (device, inode), else by
    resolved path)."""
    seen: set[object] = set()
    out = []
    for f in files:
        try:
            st = f.stat()
            key: object = (st.st_dev, st.st_ino)
        except OSError:
            key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _is_cache(d: str, in_use: str | None) -> bool:
    """Whether folder ``d`` is the cache in use (a real path) or tagged as a cache."""
    return (in_use is not None and os.path.realpath(d) == in_use) or is_cache_dir(d)


def _walk(top: Path, skipped: list[str], in_use: str | None = None) -> list[Path]:
    """The trace files under ``top`` (``os.walk``: ``Path.rglob`` silently skips a directory
    it cannot list on Python 3.11), cache folders left out (``in_use``: the real path of
    the one in use); what might have been a rank and was skipped, and why, goes to
    ``skipped``."""
    found: list[Path] = []
    if _is_cache(str(top), in_use):
        raise TraceError(f"{top}: a profplug cache folder (--cache), not traces")

    def unlisted(exc: OSError) -> None:
        if Path(exc.filename or top) == top:  # the directory given: nothing to read
            raise TraceError(f"{top}: cannot list it ({exc.strerror or exc})")
        skipped.append(f"{one_line(exc.filename)}: cannot list it ({exc.strerror or exc})")

    for d, dirs, names in os.walk(top, onerror=unlisted):
        dirs[:] = [x for x in dirs if not _is_cache(os.path.join(d, x), in_use)]
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
                return os.path.join(os.path.realpath(f.parent), n[: -len(suf)])
        return ""

    exported = {stem(f) for f in files if f.name.endswith(EXPORT_SUFFIXES)}
    plain = {stem(f) for f in files if f.name.endswith(plain_export)}
    return [f for f in files
            if not (f.name.endswith(REPORT_SUFFIXES) and stem(f) in exported)
            and not (f.name.endswith(gz_export) and stem(f) in plain)]


CACHE_ENV = "PROFPLUG_CACHE"  # the per-rank cache's folder when --cache is not given


def settled(read: ReadOptions | None) -> ReadOptions:
    """``read`` with its documented defaults filled in, once, where loading starts:
    ``--max-decompressed`` from ``$PROFPLUG_MAX_DECOMPRESSED``, the cache from
    ``$PROFPLUG_CACHE``."""
    opt = read or ReadOptions()
    if opt.max_decompressed is None:
        opt = replace(opt, max_decompressed=max_decompressed())
    if opt.cache_dir is None and os.environ.get(CACHE_ENV):
        opt = replace(opt, cache_dir=os.environ[CACHE_ENV])
    if opt.cache_dir is not None:  # the same folder for workers started elsewhere
        cache_dir = os.path.abspath(os.path.expanduser(opt.cache_dir))
        opt = replace(opt, cache_dir=cache_dir)
        why = unusable(cache_dir)
        if why is not None:  # a cache that cannot work is said once, then read without it
            print(f"profplug: warning: --cache {one_line(cache_dir)}: cannot write there "
                  f"({one_line(why)}); reading without the cache", file=sys.stderr)
            opt = replace(opt, cache_dir=None)
    return opt


@dataclass
class LoadedRanks:
    """Every rank of a run, sorted by rank: its stall analysis (when asked for), its
    Timeline (when kept), and the files lost with their worker (one line each)."""

    stalls: list[RankResult]
    timelines: list[Timeline]
    lost: list[str]
    # every file's per-rank cache key, in run order, and the cache's folder; None when the
    # run was not read whole through the cache (``scale.result_cache`` keeps run-level results)
    cache_keys: list[str] | None = None
    cache_dir: str | None = None
    # the tasks' steps' values (``dispatch.RankTask.steps``): step name -> rank -> value
    values: dict[str, dict[int, Outcome]] = field(default_factory=dict)
    tasks: dict[int, RankTask] = field(default_factory=dict)  # rank -> the task that read it
    n_events: int = 0  # API calls + GPU ops of every rank read
    # run-level analyses' per-rank parts (``dispatch.RankTask.parts``): name -> one per rank,
    # in rank order
    parts: dict[str, list[object]] = field(default_factory=dict)


def load_ranks(paths: PathsLike, *, read: ReadOptions | None = None,
               stall: StallOptions | None = None, keep_timelines: bool = True,
               backend: Backend | None = None, jobs: int | None = None,
               progress: bool | None = None, keep_gaps: bool = True,
               steps: tuple[TaskStep, ...] = (),
               gaps_per_device: int | None = None,
               parts: tuple[tuple[str, PartFn, str], ...] = ()) -> LoadedRanks:
    """Read every trace under ``paths`` and, with ``stall``, analyze each rank where it was
    read; one task per file on ``backend`` (default: the local pool of up to ``jobs``
    processes). ``keep_timelines`` False: only the per-rank results come back;
    ``keep_gaps`` False: without their per-gap rows (``gaps_per_device``: with at most so
    many per device, the longest: ``gaps.longest``); ``steps``: run on each file's ranks
    where they were read, their values kept per rank (``dispatch.RankTask.steps``);
    ``parts``: run-level analyses' parts made where each rank is read (``LoadedRanks.parts``).
    ``progress``: the progress line on stderr (default: when stderr is a terminal).
    Raises TraceError when a file cannot be read, two files claim the same rank, or every
    file was lost with its worker. Directory entries skipped that might have been a rank
    (``trace_files``) become a warning of the lowest rank (``--strict`` exits 1)."""
    skipped: list[str] = []
    opt = settled(read)
    files = trace_files(paths, skipped, opt.cache_dir)
    tasks = [RankTask(f, i, opt, stall, keep_timelines, keep_gaps, steps, gaps_per_device,
                      parts=parts) for i, f in enumerate(files)]
    bar = Progress(len(files), sum(_size(f) for f in files),
                   sys.stderr.isatty() if progress is None else progress)
    try:
        results = gather(tasks, backend or LocalBackend(jobs), on_done=bar.done)
    finally:
        bar.close()
    lost = [r.lost for r in results if r.lost is not None]
    if lost and len(lost) == len(results):
        raise TraceError(lost[0])
    stalls = sorted((s for r in results for s in r.stalls), key=lambda s: s.rank)
    timelines = sorted((t for r in results for t in r.timelines), key=lambda t: t.rank)
    _check_unique_ranks(timelines or stalls)
    check_matched(opt.steps, timelines or stalls)  # a misspelled --step-range: said first
    if skipped:  # a rank may be missing: a warning (--strict exits 1)
        line = (f"{len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} skipped (a rank "
                f"may be missing): {'; '.join(skipped)}")
        for first in (timelines[:1], stalls[:1]):
            for x in first:
                x.warnings.append(line)
    keys = [r.key for r in results if r.key]
    whole = len(results) == len(files) and not lost and len(keys) == len(results)
    by_path = {str(t.path): t for t in tasks}
    values: dict[str, dict[int, Outcome]] = {}
    task_of: dict[int, RankTask] = {}
    for r in results:
        for v in r.values:
            values.setdefault(v.name, {})[v.rank] = v.value
            task_of[v.rank] = by_path[r.path]
    return LoadedRanks(stalls, timelines, lost, keys if whole else None,
                       opt.cache_dir, values, task_of, sum(r.n_events for r in results),
                       _parts_by_rank(results, [name for name, _, _ in parts]))


def _parts_by_rank(results: list[FileResult], names: list[str]) -> dict[str, list[object]]:
    """name -> every rank's part, in rank order (a file's parts follow its ranks' order)."""
    out: dict[str, list[object]] = {}
    for name in names:
        pairs = [x for r in results if r.lost is None for x in r.parts.get(name, [])]
        out[name] = [p for _, p in sorted(pairs, key=lambda x: x[0])]
    return out


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:
        return 0


def load_timelines(paths: PathsLike, *, jobs: int | None = None,
                   progress: bool | None = None, read: ReadOptions | None = None,
                   backend: Backend | None = None) -> list[Timeline]:
    """Read every trace under ``paths`` (one path or several); one Timeline per rank, sorted
    by rank.

    Files are parsed in parallel on up to ``jobs`` processes (default: the usable CPUs), or
    on ``backend``. ``read`` goes to every reader (its ``max_decompressed`` default, from
    ``$PROFPLUG_MAX_DECOMPRESSED``, and its cache, from ``$PROFPLUG_CACHE``, are settled
    here, once). Raises TraceError when two files claim the same rank.
    """
    return load_ranks(paths, read=read, backend=backend, jobs=jobs,
                      progress=progress).timelines


def _check_unique_ranks(timelines: Sequence[Timeline | RankResult]) -> None:
    seen: dict[int, Timeline | RankResult] = {}
    for t in timelines:
        if t.rank in seen:
            a, b = seen[t.rank], t
            raise TraceError(f"rank {t.rank} appears twice: {', '.join(a.files)} "
                             f"({a.rank_rule}) and {', '.join(b.files)} ({b.rank_rule})")
        seen[t.rank] = t
