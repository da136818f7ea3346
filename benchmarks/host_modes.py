"""Is the host's speed a property of the process, or of the CPU it runs on?

    python3 benchmarks/host_modes.py [--cpus 0-15] [--per-cpu 3] [--free 24] [--torch-per-cpu 1]
        [--torch-free 12] [--no-aslr 40]

On the 1-GPU VM the what-if grid's traced runs fell into two host modes, from process to
process: the median ``cudaLaunchKernel`` call took ~4.5-5 us in one and 6-7 us in the other
(docs/whatif.md, Validation). This probe runs many short, fresh processes, one at a time,
each pinned to one CPU (``taskset -c``) or left free, and times in each:

- ``py``: a fixed pure-Python loop (no torch, ~30 ms): the host's own speed, in ns per
  iteration;
- ``launch`` (``--torch-per-cpu``/``--torch-free`` processes, with CUDA): the mean host time
  of one tiny-kernel launch (``x.add_(1)`` on 256 floats, 4,000 launches, no synchronize in
  between), in us: what the what-if grid's host-speed index measures.

It prints, per CPU and for the free processes, the median and the range, and a verdict: if
the pinned processes on one CPU agree while CPUs differ, the mode is the CPU's (bind the jobs,
``whatif_grid.py capture --cpu-bind``); if processes on one CPU disagree as much as free ones,
the mode is the process's (no binding helps). ``--no-aslr N`` adds unpinned processes with
address-space randomization off (``setarch -R``): if they all fall in one mode, the mode comes
from where the process's code and data land in memory. ``--pick N`` prints only the N fastest CPUs by
``py`` (a ``taskset`` list) after the probe, for a script to bind to.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time

PY_PROBE = r"""
import time, json
def loop(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
loop(20000)
best = None
for _ in range(5):
    t = time.perf_counter_ns(); loop(200000); dt = time.perf_counter_ns() - t
    best = dt if best is None else min(best, dt)
print(json.dumps({"py_ns": best / 200000}))
"""

TORCH_PROBE = r"""
import time, json, torch
x = torch.zeros(256, device="cuda")
for _ in range(200):
    x.add_(1)
torch.cuda.synchronize()
n = 4000
t = time.perf_counter_ns()
for _ in range(n):
    x.add_(1)
dt = time.perf_counter_ns() - t
torch.cuda.synchronize()
def loop(m):
    s = 0
    for i in range(m):
        s += i * i % 7
    return s
t = time.perf_counter_ns(); loop(200000); py = (time.perf_counter_ns() - t) / 200000
print(json.dumps({"launch_us": dt / n / 1000.0, "py_ns": py}))
"""


def parse_cpus(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def probe(code: str, cpu: int | None, timeout: float = 60.0,
          no_aslr: bool = False) -> dict[str, float] | None:
    cmd = [sys.executable, "-c", code]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    if no_aslr:  # the same address layout in every process
        cmd = ["setarch", platform.machine(), "-R", *cmd]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def summary(vals: list[float]) -> str:
    if not vals:
        return "-"
    return f"{statistics.median(vals):7.2f} ({min(vals):.2f}-{max(vals):.2f}, n={len(vals)})"


def spread(vals: list[float]) -> float:
    """max/min - 1 of a set of measurements, in %."""
    return (max(vals) / min(vals) - 1.0) * 100.0 if len(vals) > 1 and min(vals) > 0 else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="0-15")
    ap.add_argument("--per-cpu", type=int, default=3, help="pure-Python processes per CPU")
    ap.add_argument("--free", type=int, default=24, help="unpinned pure-Python processes")
    ap.add_argument("--torch-per-cpu", type=int, default=0, help="CUDA launch processes per CPU")
    ap.add_argument("--torch-free", type=int, default=0, help="unpinned CUDA launch processes")
    ap.add_argument("--no-aslr", type=int, default=0,
                    help="unpinned processes with address-space randomization off (setarch -R)")
    ap.add_argument("--torch-no-aslr", type=int, default=0,
                    help="unpinned CUDA launch processes with randomization off")
    ap.add_argument("--pick", type=int, default=0, help="print only the N fastest CPUs")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cpus = parse_cpus(args.cpus)

    # Interleaved: round k visits every CPU once, then a free process, so a drift in time
    # is not mistaken for a difference between CPUs.
    py: dict[str, list[float]] = {str(c): [] for c in cpus} | {"free": [], "noaslr": []}
    launch: dict[str, list[float]] = {str(c): [] for c in cpus} | {"free": [], "noaslr": []}
    pairs: list[tuple[float, float]] = []  # (launch us, py ns) of one CUDA process
    t0 = time.monotonic()
    for k in range(max(args.per_cpu, args.free, args.torch_per_cpu, args.torch_free,
                       args.no_aslr, args.torch_no_aslr)):
        for c in cpus:
            if k < args.per_cpu and (r := probe(PY_PROBE, c)):
                py[str(c)].append(r["py_ns"])
            if k < args.torch_per_cpu and (r := probe(TORCH_PROBE, c)):
                launch[str(c)].append(r["launch_us"])
                pairs.append((r["launch_us"], r["py_ns"]))
        if k < args.free and (r := probe(PY_PROBE, None)):
            py["free"].append(r["py_ns"])
        if k < args.no_aslr and (r := probe(PY_PROBE, None, no_aslr=True)):
            py["noaslr"].append(r["py_ns"])
        if k < args.torch_free and (r := probe(TORCH_PROBE, None)):
            launch["free"].append(r["launch_us"])
            pairs.append((r["launch_us"], r["py_ns"]))
        if k < args.torch_no_aslr and (r := probe(TORCH_PROBE, None, no_aslr=True)):
            launch["noaslr"].append(r["launch_us"])
    wall = time.monotonic() - t0

    if args.pick:
        ranked = sorted((statistics.median(v), int(c)) for c, v in py.items()
                        if c not in ("free", "noaslr") and v)
        print(",".join(str(c) for _, c in ranked[: args.pick]))
        return 0

    print(f"host_modes: {len(cpus)} CPUs, {wall:.0f} s; py = ns per loop iteration (best of 5), "
          "launch = us per tiny-kernel launch; median (range, n)")
    print(f"{'cpu':>5}  {'py ns/iter':>28}  {'launch us':>28}")
    for key in [*map(str, cpus), "free", "noaslr"]:
        if py[key] or launch.get(key):
            print(f"{key:>6}  {summary(py[key]):>28}  {summary(launch.get(key, [])):>28}")
    within = [spread(v) for c, v in py.items() if c not in ("free", "noaslr") and len(v) > 1]
    medians = [statistics.median(v) for c, v in py.items() if c not in ("free", "noaslr") and v]
    print(f"py: spread within a CPU (max/min-1) median {statistics.median(within) if within else 0:.1f}% "
          f"max {max(within) if within else 0:.1f}%; between CPU medians {spread(medians):.1f}%; "
          f"free processes {spread(py['free']):.1f}%"
          + (f"; ASLR off {spread(py['noaslr']):.1f}%" if py["noaslr"] else ""))
    lw = [spread(v) for c, v in launch.items() if c not in ("free", "noaslr") and len(v) > 1]
    lm = [statistics.median(v) for c, v in launch.items() if c not in ("free", "noaslr") and v]
    if lm or launch["free"]:
        print(f"launch: spread within a CPU median {statistics.median(lw) if lw else 0:.1f}%; "
              f"between CPU medians {spread(lm) if lm else 0:.1f}%; free processes "
              f"{spread(launch['free']):.1f}%"
              + (f"; ASLR off {spread(launch['noaslr']):.1f}%" if launch["noaslr"] else ""))
    if len(pairs) > 2:
        r = statistics.correlation([a for a, _ in pairs], [b for _, b in pairs])
        print(f"launch vs py in the same process: Pearson r = {r:+.2f} over {len(pairs)} "
              "processes (near +1: one host speed drives both)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"py_ns": py, "launch_us": launch, "pairs": pairs, "wall_s": wall}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
