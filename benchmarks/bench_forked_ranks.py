"""Seconds to analyze the ranks of one process in forked children: ``dispatch.ForkedRanks``
(a forked ``Process`` per job that inherits the Timelines, results back through pipes)
against the former way (a fork ``ProcessPoolExecutor`` whose children found the Timelines in
a module global), and in this process for scale. Interleaved, ``--repeat`` times; medians.

    python benchmarks/make_big_trace.py /tmp/big --mb 120 --ranks 2
    python benchmarks/bench_forked_ranks.py /tmp/big --repeat 3 --copies 8
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.scale.dispatch import ForkedRanks
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank

_FORMER: list[Timeline] = []  # the former way's global, in this script only


def _former_one(args: tuple[int, StallOptions]) -> RankResult:
    i, opt = args
    return analyze_rank(_FORMER[i], opt)


def former(tls: list[Timeline], opt: StallOptions, jobs: int) -> list[RankResult]:
    global _FORMER
    _FORMER = tls
    try:
        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as pool:
            return list(pool.map(_former_one, [(i, opt) for i in range(len(tls))]))
    finally:
        _FORMER = []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--copies", type=int, default=1, help="each rank analyzed this many times")
    a = ap.parse_args()
    tls = load_timelines([a.run], jobs=1, progress=False) * a.copies
    opt = StallOptions()
    rows = sum(t.api_start_ns.size + t.gpu_start_ns.size for t in tls)
    ways = {
        "in this process": lambda: [analyze_rank(t, opt) for t in tls],
        "former pool + global": lambda: former(tls, opt, a.jobs),
        "ForkedRanks": lambda: ForkedRanks(tls, opt, a.jobs).results(),
    }
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(a.repeat):
        for name, fn in ways.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    print(
        f"{len(tls)} ranks, {rows:,} API calls + GPU ops, jobs {a.jobs}, "
        f"{a.repeat} interleaved repeats (median, min-max s):"
    )
    for name, ts in times.items():
        print(f"  {name:<22} {statistics.median(ts):7.2f}  ({min(ts):.2f}-{max(ts):.2f})")


if __name__ == "__main__":
    main()
