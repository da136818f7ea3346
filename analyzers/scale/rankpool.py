"""Analyzing many big ranks at once: one forked process per rank, same results.

``analyze_rank`` is pure Python and numpy over one Timeline, so ranks are independent. When
the run is big (``PARALLEL_MIN_ROWS`` host calls + GPU ops or more), has several ranks and
the platform can fork, each rank is analyzed in a forked child (which sees the Timelines
without copying them) and only the small RankResult comes back. Otherwise, in order, here.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

from profplug.analyzers.core.cpus import usable_cpus
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank

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
