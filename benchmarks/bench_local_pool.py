"""Where a small run is best read: ``profplug report`` on 2-rank Kineto runs of growing size,
read in the calling process (``-j 1``), on a pool of one process per CPU (``-j N``: what every
run of 2 files or more did before ``dispatch.POOL_MIN_BYTES``), and by default (this process
below the threshold, the pool above it). Wall and CPU seconds of the whole command (the CLI
process and its children), medians over ``--repeat`` interleaved rounds; the threshold sits
where the pool starts to save wall time.

    python benchmarks/bench_local_pool.py --mb 2 8 32 128 --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_big_trace import build
from profplug.analyzers.core.cpus import usable_cpus
from profplug.analyzers.scale.dispatch import POOL_MIN_BYTES, trace_bytes


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the children it waited for) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, nargs="+", default=[2, 8, 32, 128])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gz", action="store_true", help="also each run gzip-compressed")
    args = ap.parse_args()
    cpus = usable_cpus()
    modes = {"-j 1": ["-j", "1"], f"-j {cpus} (pool)": ["-j", str(cpus)], "default": []}
    print(f"2 ranks, {cpus} usable CPUs, threshold {POOL_MIN_BYTES >> 20} MB; medians of "
          f"{args.repeat}")
    print(f"{'run':>14} {'MB read':>8} | " + " | ".join(f"{m:>20}" for m in modes))
    with tempfile.TemporaryDirectory() as tmp:
        for mb in args.mb:
            plain = Path(tmp) / f"mb{mb:g}"
            with contextlib.redirect_stderr(io.StringIO()):  # its per-file lines
                files = build(plain, mb, 2)
            runs = [(f"{mb:g} MB json", plain)]
            if args.gz:
                packed = Path(tmp) / f"mb{mb:g}gz"
                packed.mkdir()
                for f in files:
                    with open(f, "rb") as src, gzip.open(packed / (f.name + ".gz"), "wb") as dst:
                        shutil.copyfileobj(src, dst)
                runs.append((f"{mb:g} MB json.gz", packed))
            for label, folder in runs:
                read = sum(trace_bytes(f) for f in folder.iterdir()) / 2**20
                got: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
                for _ in range(args.repeat):
                    for m, flags in modes.items():
                        got[m].append(timed([sys.executable, "-m", "profplug", "report",
                                             str(folder), "-q", *flags, "-o", os.devnull]))
                cells = [f"{statistics.median(w for w, _ in v):6.2f} s "
                         f"{statistics.median(c for _, c in v):5.2f} CPU-s" for v in got.values()]
                print(f"{label:>14} {read:8.0f} | " + " | ".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
