"""Speed of the cross-rank analysis: synthetic pipelines of 8 to 64 ranks x 30 steps.

    .venv/bin/python benchmarks/bench_crossrank.py            # 8, 16, 32, 64 stages
    .venv/bin/python benchmarks/bench_crossrank.py 64 --layers 40

Each run is ``tests/synth/pipeline.py``'s PP decode loop (one stage per rank, ``layers``
compute kernels per stage per step, a device-wide synchronize after every send/recv, stage 5
slow), written as one Kineto file per rank and read back (``read s``, not part of the
analysis). ``cross-rank s`` = ``crossrank.cross_rank`` on the timelines with the ranks'
stall analyses given, as ``profplug report`` runs it (matching, bubbles, step spans, drain,
critical paths with their call sites, swimlane), and its phases; ``report s`` = the whole
``analyze_timelines`` (every rank's stall analysis, then the cross-rank one). One process,
wall time, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank import cross_rank, cross_rank_analysis, per_rank
from profplug.analyzers.report.analysis import analyze_timelines
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.rank import StallOptions, analyze_rank


def _best(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def phases(tls: list[Timeline]) -> dict[str, float]:
    """Seconds per part of one cross-rank analysis (``crossrank/per_rank.py``, one pass each):
    every rank's facts (its matching input, its steps), the plan (the matching, the walks),
    every rank's part (bubbles, drain, the walks' steps on its graph, call sites), the
    walks joined."""
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    facts = [per_rank.rank_facts(tl) for tl in tls]
    t["facts"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = per_rank.plan(facts, 2000)
    t["plan"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = [per_rank.rank_part(tl, ask) for tl, ask in zip(tls, p.asks, strict=True)]
    t["parts"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    per_rank.join(p, got)
    t["join"] = time.perf_counter() - t0
    return t


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="*", type=int, default=[8, 16, 32, 64])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    from synth.pipeline import PipelineSpec, write

    print(f"{'ranks':>5} {'steps':>5} {'GPU ops':>9} {'API calls':>10} {'read s':>7} "
          f"{'cross-rank s':>12} {'report s':>8}  parts (facts/plan/parts/join s)")
    for n in args.stages:
        spec = PipelineSpec(stages=n, steps=args.steps, layers=args.layers, slow_stage=5 % n)
        with tempfile.TemporaryDirectory() as tmp:
            paths, _ = write(spec, Path(tmp))
            t0 = time.perf_counter()
            tls = load_timelines(paths, jobs=1, progress=False)
            read_s = time.perf_counter() - t0
        opt = StallOptions()
        ranks = [analyze_rank(tl, opt) for tl in tls]
        xr = _best(lambda: cross_rank(tls, opt, ranks), args.repeat)  # noqa: B023
        rep = _best(lambda: analyze_timelines(tls, opt, [cross_rank_analysis()]),  # noqa: B023
                    args.repeat)
        ph = phases(tls)
        n_ops = sum(tl.n_gpu for tl in tls)
        n_api = sum(int(tl.api_start_ns.size) for tl in tls)
        print(f"{n:>5} {args.steps:>5} {n_ops:>9,} {n_api:>10,} {read_s:>7.2f} {xr:>12.2f} "
              f"{rep:>8.2f}  " + " / ".join(f"{v:.2f}" for v in ph.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
