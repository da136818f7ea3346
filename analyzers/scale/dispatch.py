"""Where ranks are read and analyzed: one task per trace file, mapped by a backend.

A task is "read this file (through the per-rank cache), analyze each rank it holds, keep the
timelines only if a run-level analysis needs them" (:func:`run_task`). A backend maps tasks
and yields their results as they finish: :class:`LocalBackend` (this process, or a pool of
local processes: the default) and ``dask_backend.DaskBackend`` (the workers of a Dask cluster)
are siblings behind one protocol; the analyses never know where they ran.

What travels back (a :class:`FileResult`): per rank the ``RankResult`` (per-gap and
per-sync-call rows, never per event; its idle gaps only with ``keep_gaps``) and, only when
``keep_timeline`` is set, the Timeline
(run-level analyses, the what-if and the cross-rank matching, read every event), and
the value of the task's ``extra`` (a run-level analysis's per-rank part made where the rank
was read: ``scale/run_level.py``). A worker
that dies twice on a file (killed, out of memory) leaves ``FileResult.lost``: a one-line
reason, and the rest of the run stands. Several big ranks read in one process (one Nsight
file holds every rank) are analyzed a forked process each (:func:`analyze_ranks`).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from profplug.analyzers.core.analysis_spec import GPU_FREE, PartFn
from profplug.analyzers.core.cpus import usable_cpus
from profplug.analyzers.core.errors import ProfplugError, TraceError
from profplug.analyzers.core.memtrim import trim
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.readers.cache import entry_key, read_cached
from profplug.analyzers.readers.corrcheck import correlation_check
from profplug.analyzers.readers.registry import reader_for
from profplug.analyzers.scale.result_cache import load_stalls, save_stalls, stalls_entry
from profplug.analyzers.stalls.gaps import NO_GAPS, longest
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank


@dataclass(frozen=True)
class RankTask:
    """One trace file to read and analyze (the ``index``-th file of the run)."""

    path: Path
    index: int
    read: ReadOptions
    stall: StallOptions | None = None  # None: read only (no per-rank analysis)
    keep_timeline: bool = True  # send the Timelines back (run-level analyses need them)
    # send each rank's idle gaps back (RankResult.gaps: one row per gap; the HTML timeline,
    # gaps_frame and the cross-rank swimlane read them); False: an empty Gaps
    keep_gaps: bool = True
    # a run-level analysis's per-rank part, run on the file's timelines where they were
    # read (``scale.run_level``: its facts, then its parts); its value travels back. One
    # with ``takes_stalls`` set is called with the file's stall analyses too (their gaps
    # all there; a list it may empty once it has what it needs: a worker's peak memory)
    extra: Callable[..., object] | None = None
    # with ``keep_gaps``: at most this many gaps per device travel, the longest
    # (``gaps.longest``: what a page draws); None: all
    gaps_per_device: int | None = None
    send_stalls: bool = True  # False: the stall analyses stay here (the extra used them)
    # run-level analyses' per-rank parts made here, each rank's value sent back:
    # (name, part function, applies) of ``core.analysis_spec.AnalysisSpec``
    parts: tuple[tuple[str, PartFn, str], ...] = ()


@dataclass
class FileResult:
    """What a task sends back: per rank of the file its stalls and (maybe) its Timeline."""

    path: str
    size_bytes: int
    stalls: list[RankResult] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)
    n_ranks: int = 0
    cached: bool = False  # read from the per-rank cache
    error: ProfplugError | None = None  # the reader's one-line error (raised by the client)
    lost: str | None = None  # the worker died twice: why, in one line
    key: str | None = None  # its per-rank cache entry's key (None: read without the cache)
    extra: object = None  # the task's ``extra`` of its timelines
    # name -> (rank, its part) per rank of the file
    parts: dict[str, list[tuple[int, object]]] = field(default_factory=dict)
    n_events: int = 0  # API calls + GPU ops of its ranks


def run_task(task: RankTask) -> FileResult:
    """Read ``task.path`` and analyze each of its ranks (on whatever process runs it)."""
    path = task.path
    size = path.stat().st_size if path.is_file() else 0
    reader = reader_for(path)
    try:
        if reader is None:  # trace_files only yields readable names
            raise TraceError(f"{path}: unknown trace format")
        where = task.read.cache_dir
        keyed = None if where is None else entry_key(reader, path, task.index, task.read)
        key = None if keyed is None else keyed.key
        kept = entry = None
        if key is not None and where is not None and task.stall is not None:
            entry = stalls_entry(where, key, task.stall)
            if not task.keep_timeline and task.extra is None:
                # the ranks' stall analyses, kept by an earlier run: no read at all, unless
                # a part needs the timelines
                kept = load_stalls(entry)
                if kept is not None and not _parts_need_read(task, kept):
                    return FileResult(str(path), size, _as_sent(task, kept), [], len(kept),
                                      True, key=key,
                                      parts={n: [(s.rank, None) for s in kept]
                                             for n, _, _ in task.parts})
        tls, hit, key = read_cached(reader, path, task.index, task.read, where, keyed)
        for tl in tls:  # ids reused, clocks apart: one warning each (not kept in the cache);
            # the rule rather than the exception: refused
            bad, warns = correlation_check(tl)
            if bad is not None:
                raise TraceError(f"{path}: rank {tl.rank}: {bad}")
            tl.warnings += [w for w in warns if w not in tl.warnings]
        trim()  # what the read freed: the analysis starts from the timelines alone
        if entry is not None and kept is None:
            # loaded after the read, not before: their decoding's peak is under the read's,
            # and the read's is not raised by them
            kept = load_stalls(entry)
        if kept is not None:
            stalls = kept
        elif task.stall is None:
            stalls = []
        else:
            # several big ranks in one file (Nsight) read in this process: a fork per rank
            stalls = analyze_ranks(tls, task.stall)
            if entry is not None:
                save_stalls(entry, stalls)
        sent = _as_sent(task, stalls)
        parts = {name: [(tl.rank, part(tl)) for tl in tls] for name, part, _ in task.parts}
        if task.extra is None:
            extra = None
        elif getattr(task.extra, "takes_stalls", False):
            extra = task.extra(tls, stalls)
        else:
            del stalls
            extra = task.extra(tls)
        trim()  # the analysis' temporaries: what is sent back (a Timeline's npz) adds to less
    except ProfplugError as exc:  # a value, so that no backend retries a bad trace
        return FileResult(str(path), size, error=exc)
    return FileResult(str(path), size, sent, tls if task.keep_timeline else [],
                      len(tls), hit, key=key, extra=extra,
                      n_events=sum(t.n_events for t in tls), parts=parts)


def _parts_need_read(task: RankTask, kept: list[RankResult]) -> bool:
    """Whether the parts of ``task`` need the file read though its ranks' stall analyses
    were kept: a part that applies to any run, or one that applies to runs without GPU work
    while a rank of the file has none (a part of a rank with GPU work is then None)."""
    return any(applies != GPU_FREE or not all(s.has_gpu_work for s in kept)
               for _, _, applies in task.parts)


def _as_sent(task: RankTask, stalls: list[RankResult]) -> list[RankResult]:
    """The stalls as they travel: none unless the task sends them; without their gaps
    unless it keeps them, and then at most ``gaps_per_device`` per device."""
    if not task.send_stalls:
        return []
    if not task.keep_gaps:
        return [replace(s, gaps=NO_GAPS) for s in stalls]
    k = task.gaps_per_device
    return stalls if k is None else [replace(s, gaps=longest(s.gaps, k)) for s in stalls]


TaskFn = Callable[[RankTask], FileResult]


class Backend(Protocol):
    """Maps a task function over tasks; yields ``(task index, result)`` as they finish."""

    name: str
    shares_disk: bool  # its workers see this machine's temporary folder

    def map(self, fn: TaskFn, tasks: Sequence[RankTask]) -> Iterator[tuple[int, FileResult]]:
        ...

    def close(self) -> None:
        ...


def lost(task: RankTask, why: str) -> FileResult:
    """The result of a task whose worker died on its retry too."""
    return FileResult(str(task.path), 0, lost=f"{task.path}: {why}; its ranks are not in "
                                               "this report")


class LocalBackend:
    """This process (one task, or ``jobs`` 1), else a pool of up to ``jobs`` processes."""

    name = "local"
    shares_disk = True  # its processes see this machine's temporary folder

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs

    def map(self, fn: TaskFn, tasks: Sequence[RankTask]) -> Iterator[tuple[int, FileResult]]:
        n = min(len(tasks), self.jobs or usable_cpus())
        if n <= 1 or mp.parent_process() is not None:
            for i, t in enumerate(tasks):
                yield i, fn(t)
            return
        broken: list[int] = []
        yield from _pooled(fn, tasks, range(len(tasks)), n, broken)
        for i in broken:  # the pool broke (a worker died): each such file once more, alone
            again: list[int] = []
            yield from _pooled(fn, tasks, [i], 1, again)
            if again:
                yield i, lost(tasks[i], "the worker process died twice reading it (killed, "
                                        "or out of memory)")

    def close(self) -> None:
        pass


def _pooled(fn: TaskFn, tasks: Sequence[RankTask], which: Sequence[int], n: int,
            broken: list[int]) -> Iterator[tuple[int, FileResult]]:
    """Run ``tasks[which]`` on ``n`` processes; those lost with a broken pool go to
    ``broken``."""
    with ProcessPoolExecutor(max_workers=n) as pool:
        pending: dict[Future[FileResult], int] = {pool.submit(fn, tasks[i]): i for i in which}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                try:
                    yield i, fut.result()
                except BrokenProcessPool:
                    broken.append(i)


def gather(tasks: Sequence[RankTask], backend: Backend, *, fn: TaskFn = run_task,
           on_done: Callable[[FileResult], None] | None = None) -> list[FileResult]:
    """Every task's result, in task order. A reader's error is raised here once every task
    is done: the error of the first file in order, as in one process."""
    out: list[FileResult | None] = [None] * len(tasks)
    for i, res in backend.map(fn, tasks):
        out[i] = res
        if on_done is not None:
            on_done(res)
    for r in out:
        if r is not None and r.error is not None:
            raise r.error
    return [r for r in out if r is not None]


# ---------------------------------------------------------------- several big ranks of one file
# ``analyze_rank`` is pure Python and numpy over one Timeline, so ranks are independent. When
# the ranks read in one process are big (``PARALLEL_MIN_ROWS`` host calls + GPU ops or more),
# several, and the platform can fork, each is analyzed in a forked child (which sees the
# Timelines without copying them) and only its small RankResult comes back.
PARALLEL_MIN_ROWS = 4_000_000  # smaller runs are analyzed in this process

_WORK: list[Timeline] = []  # the Timelines a forked child analyzes, by index


def _one(args: tuple[int, StallOptions]) -> RankResult:
    i, opt = args
    return analyze_rank(_WORK[i], opt)


def analyze_ranks(timelines: list[Timeline], opt: StallOptions, *,
                  jobs: int | None = None) -> list[RankResult]:
    """``[analyze_rank(t, opt) for t in timelines]``, on up to ``jobs`` processes."""
    global _WORK
    n = min(len(timelines), jobs or usable_cpus())
    rows = sum(t.api_start_ns.size + t.gpu_start_ns.size for t in timelines)
    if (n <= 1 or rows < PARALLEL_MIN_ROWS or mp.parent_process() is not None
            or "fork" not in mp.get_all_start_methods()):
        return [analyze_rank(t, opt) for t in timelines]
    _WORK = timelines
    try:
        with ProcessPoolExecutor(n, mp_context=mp.get_context("fork")) as pool:
            return list(pool.map(_one, [(i, opt) for i in range(len(timelines))]))
    finally:
        _WORK = []
