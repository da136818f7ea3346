"""Benchmark: ``profplug report`` on a ~1 GB Nsight export vs ``nsys stats`` / ``nsys analyze``.

    .venv/bin/python benchmarks/bench_nsys.py [--size-mb 1024] [--out /tmp/big.sqlite]
        [--nsys PATH] [--seed REAL_EXPORT.sqlite[.gz]] [--reuse]

Builds a realistic export (2 ranks of a pipeline decode loop: kernel launches, NCCL
kernels, event record / stream wait, cudaDeviceSynchronize, NVTX ranges, SYNCHRONIZATION
rows) with tests/synth/nsys.py, then doubles every table in SQL (rows copied with times
and correlation ids shifted) until the file reaches ``--size-mb``. Each command runs in
a fresh child process; wall time and the child's peak RSS (wait4) are printed as a table.
``nsys`` is ``--nsys``, else $PROFPLUG_NSYS, else PATH; its rows are skipped when absent.
``--seed`` grows a real export instead (better: real table layouts and id ranges).

Measured (2-core AMD EPYC VM, nsys 2022.4.2; docs/nsight.md has the details)::

    --seed sample_traces/pp2_infer_nsys/event/report.sqlite.gz: 1473 MiB
    command                                    wall s  peak RSS MiB  exit
    profplug report --format json                11.2          2245     0
    nsys stats -r cudaapisum,gpukernsum          25.8          1154     0
    nsys analyze -r cuda-sync-api                 2.0            59     0

    synthetic: 1139 MiB
    profplug report --format json                 9.3          2075     0
    nsys stats -r cudaapisum,gpukernsum          13.1           997     0
    nsys analyze -r cuda-sync-api                 0.8            59     0
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from synth import NsysExport  # noqa: E402

TIMED_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")


def base_export(path: Path, steps: int = 200) -> Path:
    """A 2-rank decode loop; per step ~24 launches, a NCCL send/recv, a device sync."""
    ex = NsysExport(style="2025.3")
    for rank, pid in enumerate((5001, 5002)):
        p = ex.process(pid)
        p.rank_mark(rank)
        p.domain_create("profplug", domain=1)
        t = 10.0
        for _ in range(steps):
            t0 = t
            p.annotation("profplug.recv_from_prev_pipeline_rank_", t, 30, domain=1)
            p.launch(t, t + 2, 12, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096>)",
                     stream=20, device=rank)
            rec = p.runtime("cudaEventRecord", t + 5, 1)
            wait = p.runtime("cudaStreamWaitEvent", t + 6, 1)
            p.cuda_sync("Stream Wait Event", t + 6, 0, stream=7, device=rank, corr=wait,
                        wait_on_stream=20, wait_corr=rec)
            p.annotation("profplug.sync.device", t + 8, 20, domain=1)
            p.runtime("cudaDeviceSynchronize", t + 8, 18)
            t += 30
            for k in range(24):
                p.launch(t, t + 1, 6 + k % 5,
                         f"void at::native::elementwise_kernel<128, {k % 4}>(int, float*)",
                         stream=7, device=rank, api_dur=3)
                t += 4
            p.gpu(t, 2, "[CUDA memcpy DtoH]", stream=7, device=rank, cat="gpu_memcpy")
            t += 5
            p.annotation("profplug.step", t0, t - t0, domain=1)
    return ex.write(path)


def _shifted(cols: list[str], span: str, cspan: str) -> str:
    out = []
    for c in cols:
        q = f'"{c}"'
        if c in ("start", "end"):
            out.append(f"{q} + {span}")
        elif c == "correlationId":
            out.append(f"{q} + {cspan}")
        else:
            out.append(q)
    return ", ".join(out)


def grow(path: Path, size_mb: int) -> None:
    """Double every event table (times and correlation ids shifted) until size_mb."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    while path.stat().st_size < size_mb * 2**20:
        lo, hi = con.execute('SELECT MIN(start), MAX("end") FROM CUPTI_ACTIVITY_KIND_RUNTIME'
                             ).fetchone()
        span = hi - lo + 1000
        cspan = con.execute("SELECT MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
                            ).fetchone()[0] + 1
        have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for t in (*TIMED_TABLES, "CUPTI_ACTIVITY_KIND_CUDA_EVENT"):
            if t not in have:
                continue
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            where = " WHERE eventType != 34 AND eventType != 75" if t == "NVTX_EVENTS" else ""
            con.execute(f"INSERT INTO {t} SELECT {_shifted(cols, str(span), str(cspan))} "
                        f"FROM {t}{where}")
        con.commit()
    con.close()


def measure(cmd: list[str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, exit code) of ``cmd`` run as a child."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
    return wall, ru.ru_maxrss / 1024.0, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--out", type=Path, default=Path("/tmp/profplug-bench-nsys.sqlite"))
    ap.add_argument("--nsys", default=None)
    ap.add_argument("--reuse", action="store_true", help="reuse --out if it exists")
    ap.add_argument("--seed", type=Path, default=None,
                    help="grow this real export (.sqlite or .sqlite.gz) instead of a synthetic one")
    args = ap.parse_args()
    if not (args.reuse and args.out.is_file()):
        t0 = time.perf_counter()
        if args.seed is None:
            base_export(args.out)
        else:
            opener = gzip.open if args.seed.name.endswith(".gz") else open
            with opener(args.seed, "rb") as src, open(args.out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
        grow(args.out, args.size_mb)
        print(f"built {args.out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    con = sqlite3.connect(f"file:{args.out}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    counts = {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TIMED_TABLES
              if t in have}
    con.close()
    size = args.out.stat().st_size / 2**20
    print(f"export: {size:.0f} MiB; rows: " + ", ".join(
        f"{t.replace('CUPTI_ACTIVITY_KIND_', '')} {n:,}" for t, n in counts.items()))

    profplug = str(ROOT / ".venv" / "bin" / "profplug")
    if not Path(profplug).exists():
        profplug = shutil.which("profplug") or "profplug"
    runs = [("profplug report --format json",
             [profplug, "report", "--format", "json", "--no-whatif", "--no-cross-rank", "-o", os.devnull,
              str(args.out)])]
    nsys = shutil.which(args.nsys or os.environ.get("PROFPLUG_NSYS") or "nsys")
    if nsys:
        runs += [("nsys stats -r cudaapisum,gpukernsum",
                  [nsys, "stats", "-q", "-r", "cudaapisum,gpukernsum", str(args.out)]),
                 ("nsys analyze -r cuda-sync-api",
                  [nsys, "analyze", "-q", "-r", "cuda-sync-api", str(args.out)])]
    else:
        print("nsys not found: only profplug timed", file=sys.stderr)
    print(f"\n{'command':<40} {'wall s':>8} {'peak RSS MiB':>13} {'exit':>5}")
    for name, cmd in runs:
        wall, rss, rc = measure(cmd)
        print(f"{name:<40} {wall:>8.1f} {rss:>13.0f} {rc:>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
