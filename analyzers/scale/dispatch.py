"""Where ranks are read and analyzed: one task per trace file, mapped by a backend.

A task is "read this file (through the per-rank cache), analyze each rank it holds, keep the
timelines only if a run-level analysis needs them" (:func:`run_task`). A backend maps tasks
and yields their results as they finish: :class:`LocalBackend` (this process, or a pool of
local processes: the default) and ``dask_backend.DaskBackend`` (the workers of a Dask cluster)
are siblings behind one protocol; the analyses never know where they ran.

What travels back (a :class:`FileResult`): per rank the ``RankResult`` (per-gap and
per-sync-call rows, never per event; its idle gaps only with ``keep_gaps``) and, only when
``keep_timeline`` is set, the Timeline
(run-level analyses, the what-if and the cross-rank matching, read every event), the
by-rank analyses' parts, and per rank the value of each of the task's ``steps`` (the
analyses in rounds: ``scale/run_level.py``) as ``Ok`` or ``TaskError`` (``core.optional``):
a step that fails costs its analysis, not the file's read. A reader's error comes back as
``FileResult.error``, a ``TaskError`` the client raises (``gather``). A worker
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
from multiprocessing import connection
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol, cast

from profplug.analyzers.core.analysis_spec import GPU_FREE, PartFn, RankStep
from profplug.analyzers.core.cpus import usable_cpus
from profplug.analyzers.core.errors import ProfplugError, TraceError
from profplug.analyzers.core.memtrim import trim, trim_large
from profplug.analyzers.core.optional import FAILED, Outcome, TaskError, guarded
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.readers.cache import entry_key, read_cached
from profplug.analyzers.readers.corrcheck import correlation_check
from profplug.analyzers.readers.registry import reader_for
from profplug.analyzers.scale.result_cache import load_stalls, save_stalls, stalls_entry
from profplug.analyzers.stalls.gaps import NO_GAPS, longest
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank

# A step run on each rank a task reads: (the rank it is for, None: every rank; its name; the
# step). Its value travels back per rank as ``Ok`` or ``TaskError``, never an exception.
TaskStep = tuple["int | None", str, RankStep]


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
    # the steps of run-level analyses in rounds (``scale.run_level``) run on the file's
    # ranks where they were read; each value travels back (``FileResult.values``). A step
    # whose ``needs_stalls`` is set is called with its rank's stall analysis
    steps: tuple[TaskStep, ...] = ()
    # with ``keep_gaps``: at most this many gaps per device travel, the longest
    # (``gaps.longest``: what a page draws); None: all
    gaps_per_device: int | None = None
    send_stalls: bool = True  # False: the stall analyses stay here (the steps used them)
    # run-level analyses' per-rank parts made here, each rank's value sent back:
    # (name, part function, applies) of ``core.analysis_spec.AnalysisSpec``
    parts: tuple[tuple[str, PartFn, str], ...] = ()


@dataclass(frozen=True)
class StepValue:
    """One rank's value of a task's step (``RankTask.steps``)."""

    rank: int
    name: str
    value: Outcome


@dataclass(frozen=True)
class FileResult:
    """What a task sends back: per rank of the file its stalls and (maybe) its Timeline."""

    path: str
    size_bytes: int
    stalls: list[RankResult] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)
    n_ranks: int = 0
    cached: bool = False  # read from the per-rank cache
    error: TaskError | None = None  # the reader's one-line error (raised by the client)
    lost: str | None = None  # the worker died twice: why, in one line
    key: str | None = None  # its per-rank cache entry's key (None: read without the cache)
    values: tuple[StepValue, ...] = ()  # the task's steps' values, per rank
    # name -> (rank, its part) per rank of the file
    parts: dict[str, list[tuple[int, object]]] = field(default_factory=dict)
    n_events: int = 0  # API calls + GPU ops of its ranks


def run_task(task: RankTask) -> FileResult:
    """Read ``task.path`` and analyze each of its ranks (on whatever process runs it): the
    stall analyses kept by an earlier run when they are all it needs (:func:`_kept_only`),
    else the file read (:func:`_read`), its ranks analyzed (:func:`_stalls`), their parts
    and steps made (:func:`_parts`, :func:`_steps`)."""
    path = task.path
    size = path.stat().st_size if path.is_file() else 0
    try:
        reader = reader_for(path)
        if reader is None:  # trace_files only yields readable names
            raise TraceError(f"{path}: unknown trace format")
        keyed = None if task.read.cache_dir is None else \
            entry_key(reader, path, task.index, task.read)
        key = None if keyed is None else keyed.key
        entry = None if key is None or task.read.cache_dir is None or task.stall is None \
            else stalls_entry(task.read.cache_dir, key, task.stall)
        done, kept = _kept_only(task, entry, size, key)
        if done is not None:
            return done
        tls, hit, key = read_cached(reader, path, task.index, task.read,
                                    task.read.cache_dir, keyed)
        _check_correlations(path, tls)
        trim()  # what the read freed: the analysis starts from the timelines alone
        stalls = kept if kept is not None else _stalls(task, tls, entry)
        sent = _as_sent(task, stalls)
        parts = _parts(task, tls)
        values = _steps(task, tls, stalls)
        del stalls
        trim()  # the analysis' temporaries: what is sent back (a Timeline's npz) adds to less
    except ProfplugError as exc:  # a value, so that no backend retries a bad trace
        return FileResult(str(path), size, error=TaskError.of(exc, str(path)))
    return FileResult(str(path), size, sent, tls if task.keep_timeline else [],
                      len(tls), hit, key=key, values=values,
                      n_events=sum(t.n_events for t in tls), parts=parts)


def _kept_only(task: RankTask, entry: Path | None, size: int, key: str | None
               ) -> tuple[FileResult | None, list[RankResult] | None]:
    """The result from the ranks' stall analyses kept by an earlier run, when they are all
    the task needs (no timeline, no step, no part that needs the file read); else None, and
    the stall analyses when they were loaded."""
    if entry is None or task.keep_timeline or task.steps:
        return None, None
    kept = load_stalls(entry)
    if kept is None or _parts_need_read(task, kept):
        return None, kept
    return FileResult(str(task.path), size, _as_sent(task, kept), [], len(kept), True,
                      key=key, parts={n: [(s.rank, None) for s in kept]
                                      for n, _, _ in task.parts}), kept


def _check_correlations(path: Path, tls: list[Timeline]) -> None:
    """Each rank's correlation check: ids reused, clocks apart are one warning each (not
    kept in the cache); the rule rather than the exception is refused (TraceError)."""
    for tl in tls:
        bad, warns = correlation_check(tl)
        if bad is not None:
            raise TraceError(f"{path}: rank {tl.rank}: {bad}")
        tl.warnings += [w for w in warns if w not in tl.warnings]


def _stalls(task: RankTask, tls: list[Timeline], entry: Path | None) -> list[RankResult]:
    """The ranks' stall analyses: kept in the cache's ``entry`` (loaded after the read, not
    before: their decoding's peak is under the read's), else made and kept there."""
    if task.stall is None:
        return []
    kept = load_stalls(entry) if entry is not None else None
    if kept is not None:
        return kept
    # several big ranks in one file (Nsight) read in this process: a fork per rank
    stalls = analyze_ranks(tls, task.stall)
    if entry is not None:
        save_stalls(entry, stalls)
    return stalls


def _parts(task: RankTask, tls: list[Timeline]) -> dict[str, list[tuple[int, object]]]:
    """The by-rank analyses' parts, per rank (``RankTask.parts``)."""
    return {name: [(tl.rank, part(tl)) for tl in tls] for name, part, _ in task.parts}


def _steps(task: RankTask, tls: list[Timeline], stalls: list[RankResult]
           ) -> tuple[StepValue, ...]:
    """Each rank's values of the task's steps, in order, each rank's freed memory given back
    between them (a worker's peak: docs/scale.md); a step that fails is its ``TaskError``."""
    by_rank = {s.rank: s for s in stalls}
    out = []
    for tl in tls:
        for rank, name, step in task.steps:
            if rank is not None and rank != tl.rank:
                continue
            stall = by_rank.get(tl.rank) if step.needs_stalls else None
            out.append(StepValue(tl.rank, name, guarded(step, tl, stall)))
            trim_large(tl.n_events)
        by_rank.pop(tl.rank, None)
    return tuple(out)


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


# Below this many bytes read (``trace_bytes``), a run is read here when ``jobs`` is left out:
# a pool's start-up costs more than the other cores save (benchmarks/bench_local_pool.py).
POOL_MIN_BYTES = 32 << 20
INFLATE = 10  # a .gz trace (Kineto JSON, Nsight SQLite) holds about 10x its size on disk


def trace_bytes(path: Path) -> int:
    """Bytes reading ``path`` parses, about: its size (``INFLATE`` x for a ``.gz``; at least
    ``POOL_MIN_BYTES`` for an ``.nsys-rep``, which nsys exports first); missing: 0."""
    size = path.stat().st_size if path.is_file() else 0
    if size and path.name.endswith(".nsys-rep"):
        return max(size, POOL_MIN_BYTES)
    return size * INFLATE if path.name.endswith(".gz") else size


class LocalBackend:
    """This process (one task, ``jobs`` 1, or ``jobs`` left out on a small run), else a pool
    of up to ``jobs`` processes (left out: one per CPU)."""

    name = "local"
    shares_disk = True  # its processes see this machine's temporary folder

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs

    def map(self, fn: TaskFn, tasks: Sequence[RankTask]) -> Iterator[tuple[int, FileResult]]:
        n = min(len(tasks), self.jobs or usable_cpus())
        if n <= 1 or mp.parent_process() is not None or (
                self.jobs is None and sum(trace_bytes(t.path) for t in tasks) < POOL_MIN_BYTES):
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
    """Run ``tasks[which]`` on ``n`` processes; those a broken pool lost go to ``broken``."""
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
            raise r.error.error()
    return [r for r in out if r is not None]


# ---------------------------------------------------------------- several big ranks of one file
# ``analyze_rank`` is pure Python and numpy over one Timeline, so ranks are independent. When
# the ranks read in one process are big (``PARALLEL_MIN_ROWS`` host calls + GPU ops or more),
# several, and the platform can fork, each is analyzed in a forked child (which sees the
# Timelines without copying them: :class:`ForkedRanks`) and only its small RankResult comes
# back.
PARALLEL_MIN_ROWS = 4_000_000  # smaller runs are analyzed in this process


@dataclass(frozen=True)
class ForkedRanks:
    """Ranks analyzed in ``jobs`` forked children: each child starts from this object, which
    it inherits with the Timelines (never pickled: a forked process's target is not sent),
    analyzes every ``jobs``-th rank and sends back each ``RankResult`` (or its
    ``TaskError``) through its pipe."""

    timelines: list[Timeline]
    opt: StallOptions
    jobs: int

    def results(self) -> list[RankResult]:
        """Every rank's stall analysis, in order; a child that died: ``BrokenProcessPool``
        (as a pool's would), a rank whose analysis raised: its error."""
        ctx = mp.get_context("fork")
        pipes, children = [], []
        for k in range(self.jobs):
            recv, send = ctx.Pipe(duplex=False)
            child = ctx.Process(target=self._child, args=(k, send), daemon=True)
            child.start()
            send.close()
            pipes.append(recv)
            children.append(child)
        try:
            got = _received(pipes)
        finally:
            for child in children:
                child.join()
        if len(got) < len(self.timelines):
            raise BrokenProcessPool("a process analyzing a rank died (killed, or out of "
                                    "memory)")
        out = []
        for i in range(len(self.timelines)):
            value = got[i]
            if isinstance(value, TaskError):
                raise value.error() if value.kind != FAILED else RuntimeError(value.message)
            out.append(value.value)
        return out

    def _child(self, k: int, send: Connection) -> None:
        """In the child: ranks ``k``, ``k + jobs``, ... analyzed, each result sent."""
        for i in range(k, len(self.timelines), self.jobs):
            send.send((i, guarded(analyze_rank, self.timelines[i], self.opt)))
        send.close()


def _received(pipes: list[Connection]) -> dict[int, Outcome]:
    """Every (rank index, value) the children send, read as each arrives (a child never
    waits on another's reader), until every pipe is closed."""
    out: dict[int, Outcome] = {}
    live = list(pipes)
    while live:
        for ready in connection.wait(live):
            recv = cast(Connection, ready)  # wait() gives back the pipes it was given
            try:
                i, value = recv.recv()
            except EOFError:
                live.remove(recv)
                continue
            out[i] = value
    return out


def analyze_ranks(timelines: list[Timeline], opt: StallOptions, *,
                  jobs: int | None = None) -> list[RankResult]:
    """``[analyze_rank(t, opt) for t in timelines]``, on up to ``jobs`` processes."""
    n = min(len(timelines), jobs or usable_cpus())
    rows = sum(t.api_start_ns.size + t.gpu_start_ns.size for t in timelines)
    if (n <= 1 or rows < PARALLEL_MIN_ROWS or mp.parent_process() is not None
            or "fork" not in mp.get_all_start_methods()):
        return [analyze_rank(t, opt) for t in timelines]
    return ForkedRanks(timelines, opt, n).results()
