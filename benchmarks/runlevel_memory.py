"""Where the client's memory goes in the run-level analyses: the traced peak (tracemalloc) of
the cross-rank analysis and of the what-if over loaded timelines, per event (API call or
GPU op of every rank), beside the timelines' own bytes.

    .venv/bin/python benchmarks/runlevel_memory.py DIR [-j N]

DIR: a run's traces (e.g. ``bench_scale.py``'s ``run16-20`` folder). The ranks are read
and analyzed as a report does (``load_ranks``: stalls with their gaps, timelines kept),
then each analysis runs under tracemalloc, within the caches a report opens. numpy's
allocations are traced; the process's RSS is higher (glibc keeps freed heap): see
docs/scale.md.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("-j", "--jobs", type=int, default=None)
    a = ap.parse_args()
    from profplug.analyzers.core.memo import Memo
    from profplug.analyzers.crossrank.analysis import cross_rank_analysis
    from profplug.analyzers.scale.load import load_ranks
    from profplug.analyzers.stalls.rank import StallOptions
    from profplug.analyzers.whatif import whatif_analysis

    opt = StallOptions()
    got = load_ranks(a.dir, stall=opt, keep_timelines=True, jobs=a.jobs, progress=False)
    tls = got.timelines
    events = sum(t.n_gpu + int(t.api_start_ns.size) for t in tls)
    tl_bytes = sum(v.nbytes for t in tls for v in vars(t).values() if hasattr(v, "nbytes"))
    gap_bytes = sum(v.nbytes for r in got.stalls for v in vars(r.gaps).values()
                    if hasattr(v, "nbytes"))
    print(f"{len(tls)} ranks, {events:,} API calls + GPU ops")
    print(f"{'held / peak':<34} {'MB':>8} {'B/event':>8} {'s':>6}")
    print(f"{'timelines (held)':<34} {tl_bytes / 1e6:>8.1f} {tl_bytes / events:>8.0f}")
    print(f"{'stall gaps (held)':<34} {gap_bytes / 1e6:>8.1f} {gap_bytes / events:>8.0f}")
    tracemalloc.start()
    memo = Memo()  # the report's: both analyses share it
    for name, fn in (("cross_rank (traced peak)", cross_rank_analysis()),
                     ("what-if (traced peak)", whatif_analysis())):
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        fn(tls, opt, ranks=got.stalls, memo=memo)
        s = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] - base
        print(f"{name:<34} {peak / 1e6:>8.1f} {peak / events:>8.0f} {s:>6.1f}")


if __name__ == "__main__":
    main()
