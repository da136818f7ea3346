"""The client's solve of the what-if's joined reduced graphs (``whatif/joined_replay.solve``), by the
solver's two passes (``graph/longest_path``): Kahn's order on Python lists
(``longest_path``) against the level-by-level numpy pass (``longest_path_by_levels``), time
and traced peak.

    .venv/bin/python benchmarks/bench_solve.py /tmp/profplug-scale/run64-20 --ranks 16 \\
        --copies 1,4,32

The joined graph of ``--ranks`` rank files of a run (as ``whatif_in_rounds`` builds it),
then ``--copies`` of it side by side: as many levels (each rank's chain of waits), more
ranks per level, as a run of that many times the ranks. Best of 3 for the time; the traced
peak (tracemalloc, a separate pass: it slows the lists' pass many times) per edge.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
from profplug.analyzers.graph import longest_path
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import joined_replay

# the four steps of the what-if's rounds in one process: the tests' helper
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from rounds_in_one_process import whatif_in_rounds


def joined_graph(run: Path, ranks: int) -> dict[str, Any]:
    files = sorted(run.glob("rank*.json"))[:ranks]
    got: dict[str, Any] = {}
    real = joined_replay.longest_path, joined_replay.longest_path_by_levels

    def capture(n, src, dst, w, sources):
        got.update(n=n, src=src, dst=dst, w=w, sources=list(sources))
        return longest_path.longest_path(n, src, dst, w, sources)

    # the joined graph as solve() hands it to the solver, whichever pass its width picks
    joined_replay.longest_path = joined_replay.longest_path_by_levels = capture
    try:
        whatif_in_rounds(load_timelines([str(f) for f in files], progress=False))
    finally:
        joined_replay.longest_path, joined_replay.longest_path_by_levels = real
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--copies", default="1,4,32")
    a = ap.parse_args()
    g = joined_graph(a.run, a.ranks)
    n = g["n"]
    print(f"{'ranks':>6} {'nodes':>10} {'edges':>11} {'solve':<22} {'s':>7} {'B/edge':>7} same")
    for k in [int(x) for x in a.copies.split(",")]:
        src = np.concatenate([g["src"] + i * n for i in range(k)])
        dst = np.concatenate([g["dst"] + i * n for i in range(k)])
        w = np.tile(g["w"], k)
        sources = [s + i * n for i in range(k) for s in g["sources"]]
        first = None
        for fn in (longest_path.longest_path, longest_path.longest_path_by_levels):
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                t = fn(n * k, src, dst, w, sources)
                best = min(best, time.perf_counter() - t0)
            tracemalloc.start()
            fn(n * k, src, dst, w, sources)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            first = t if first is None else first
            same = "same" if t is not None and np.array_equal(t, first) else "DIFF"
            print(f"{a.ranks * k:>6} {n * k:>10,} {src.size:>11,} {fn.__name__:<22} "
                  f"{best:>7.3f} {peak / src.size:>7.1f} {same}", flush=True)


if __name__ == "__main__":
    main()
