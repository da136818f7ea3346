"""Per-call cost of profplug.annotate vs a bare NVTX domain push/pop, in one run.

    .venv/bin/python benchmarks/bench_annotate.py [--n 1000000] [--repeat 7]

Prints ns per call (best of ``--repeat``; loop overhead included in every row) and the
ratio to the bare push/pop, with no profiler recording. The target is annotate <= 1.5x bare.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import nvtx
import torch
from profplug.analyzers.core import ranges

import profplug
from profplug.patching import _wrap_synchronize


def _best(fn: Callable[[int], None], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="calls per measurement")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    dom = nvtx.get_domain(ranges.DOMAIN)
    attrs = dom.get_event_attributes(message="bench.range")
    rng = profplug.annotate("bench.range")
    noop = "".format

    class _Floor:  # the cheapest possible with-statement: C-level no-op enter/exit
        __slots__ = ()
        __enter__ = noop
        __exit__ = noop

    floor = _Floor()

    def empty_loop(n: int) -> None:
        for _ in range(n):
            pass

    def bare(n: int) -> None:
        push, pop = dom.push_range, dom.pop_range
        for _ in range(n):
            push(attrs)
            pop()

    def with_floor(n: int) -> None:
        for _ in range(n):
            with floor:
                pass

    def cached(n: int) -> None:
        for _ in range(n):
            with rng:
                pass

    def by_name(n: int) -> None:
        ann = profplug.annotate
        for _ in range(n):
            with ann("bench.range"):
                pass

    def with_payload(n: int) -> None:
        ann = profplug.annotate
        for _ in range(n):
            with ann("bench.range", bytes=4096):
                pass

    def enabled_check(n: int) -> None:
        f = torch.autograd._profiler_enabled
        for _ in range(n):
            f()

    sync = _wrap_synchronize(lambda device=None: None)

    def sync_wrapper(n: int) -> None:
        for _ in range(n):
            sync()

    def record_function(n: int) -> None:
        rf = torch.profiler.record_function
        for _ in range(n):
            with rf("bench.range"):
                pass

    rows = [
        ("empty loop", empty_loop, 1),
        ("nvtx domain push/pop, prebuilt attributes (bare)", bare, 1),
        ("with-statement floor (C no-op enter/exit)", with_floor, 1),
        ("with profplug.annotate(name) [cached object]", cached, 1),
        ("with profplug.annotate('name')", by_name, 1),
        ("with profplug.annotate('name', bytes=4096)", with_payload, 1),
        ("torch.autograd._profiler_enabled()", enabled_check, 1),
        ("patched torch.cuda.synchronize wrapper (no-op inner)", sync_wrapper, 1),
        ("torch.profiler.record_function (no profiler)", record_function, 20),
    ]
    results = {label: _best(fn, args.n // div, args.repeat) for label, fn, div in rows}
    base = results["nvtx domain push/pop, prebuilt attributes (bare)"]
    tool = "attached" if type(dom).__name__ == "Domain" else "not attached"
    print(f"torch {torch.__version__}, NVTX tool {tool}, n={args.n}, best of {args.repeat}\n")
    print("| call | ns | x bare |")
    print("| --- | ---: | ---: |")
    for label, ns in results.items():
        print(f"| {label} | {ns:.1f} | {ns / base:.2f} |")
    print()
    for label in ("with profplug.annotate(name) [cached object]",
                  "with profplug.annotate('name')"):
        ratio = results[label] / base
        verdict = "meets" if ratio <= 1.5 else "misses"
        print(f"{label}: {ratio:.2f}x bare push/pop, {verdict} the 1.5x target")
    floor = results["with-statement floor (C no-op enter/exit)"] / base
    print(f"(a with-statement alone costs {floor:.2f}x bare push/pop on this Python)")


if __name__ == "__main__":
    main()
