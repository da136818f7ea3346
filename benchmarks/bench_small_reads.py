"""Benchmark: reading small Kineto traces (the shipped samples, 76-400 kB gzip, 1-4 MB JSON).

For each sample, in this process, the median of ``--repeat`` reads (CPU ms, ``time.process_time``):

- ``stream``: profplug's event stream (``EventStream``: inflate, find ``traceEvents``, decode
  the events in batches), the part of reading that does not depend on the analyses;
- ``stream@REV`` (with ``--rev REV``): the same class from ``analyzers/readers/kineto/stream.py``
  at git revision REV, run against today's other modules;
- ``read_kineto``: the whole read into a Timeline;
- ``json``: the peer, a bare ``json.loads`` of the inflated file (stdlib; no Timeline).

    python benchmarks/bench_small_reads.py [--repeat 7] [--rev HEAD~1]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import time
import types
from collections.abc import Callable
from pathlib import Path

from profplug.analyzers.readers.kineto import stream
from profplug.analyzers.readers.kineto.reader import read_kineto

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 1 << 34


def stream_class_at(rev: str) -> type:
    """``EventStream`` as defined in ``stream.py`` at git revision ``rev``."""
    src = subprocess.run(["git", "show", f"{rev}:analyzers/readers/kineto/stream.py"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    mod = types.ModuleType(f"stream_at_{rev}")
    exec(compile(src, f"stream.py@{rev}", "exec"), mod.__dict__)
    return mod.__dict__["EventStream"]


def events_of(cls: type) -> Callable[[Path], int]:
    def read(path: Path) -> int:
        return sum(len(batch) for batch in cls(path, LIMIT))
    return read


def cpu_ms(fn: Callable[[Path], object], path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn(path)
        times.append((time.process_time() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rev", help="also time EventStream at this git revision")
    args = ap.parse_args()
    tools: dict[str, Callable[[Path], object]] = {"stream": events_of(stream.EventStream)}
    if args.rev:
        old = events_of(stream_class_at(args.rev))
        tools[f"stream@{args.rev}"] = old
    tools["read_kineto"] = read_kineto
    tools["json"] = lambda p: json.loads(gzip.decompress(p.read_bytes()))
    files = sorted(ROOT.glob("sample_traces/**/*.json.gz"))
    totals = dict.fromkeys(tools, 0.0)
    print(f"{'trace':<62} {'kB gz':>6} " + " ".join(f"{t:>16}" for t in tools))
    for path in files:
        row = {name: cpu_ms(fn, path, args.repeat) for name, fn in tools.items()}
        for name, ms in row.items():
            totals[name] += ms
        rel = str(path.relative_to(ROOT / "sample_traces"))
        print(f"{rel[-62:]:<62} {path.stat().st_size / 1e3:6.0f} "
              + " ".join(f"{ms:14.1f}ms" for ms in row.values()))
    print(f"{f'all {len(files)} files (sum of medians)':<62} {'':>6} "
          + " ".join(f"{ms:14.1f}ms" for ms in totals.values()))


if __name__ == "__main__":
    main()
