"""Benchmark: ``profplug report`` vs Holistic Trace Analysis vs a bare JSON parse.

Builds (or reuses) a large Kineto trace, one file per rank (see make_big_trace.py), then
runs each tool as a fresh child process and measures:

- wall: seconds from spawn to exit;
- peak RSS: the highest sum of resident memory over the child's whole process tree
  (sampled from /proc every 20 ms), so parallel workers count together; also the largest
  single process (``ru_maxrss`` from wait4);
- cpu s: user+sys CPU seconds of the tree (less sensitive than wall to other load on the
  machine); cpu/wall: about the number of busy cores.

    python benchmarks/bench_analyzer.py [--dir /tmp/profplug-bench] [--mb 300] [--ranks 2]
        [--hta-python /tmp/hta-venv/bin/python] [--cap 600] [--json results.json]

HTA (``pip install holistictraceanalysis``) runs under ``--hta-python`` (default: this
interpreter when it can import ``hta``, else /tmp/hta-venv/bin/python); it is skipped when
neither has it. A tool still running after ``--cap`` seconds is stopped and reported "> cap".

Then, in this process, the one-rank cost of the cross-rank analysis (rank 0's file alone):
before = forced (``crossrank.cross_rank``, what every report ran), after = the report's
(``cross_rank_analysis()``, which skips a run of one rank or without NCCL kernels), and the
per-rank stall analysis for scale. ``--skip crossrank`` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_big_trace import build

PAGE = os.sysconf("SC_PAGE_SIZE")

HTA_SCRIPT = """
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(a.t.traces)
out = a.get_idle_time_breakdown(ranks=ranks, visualize=False)
df = out[0] if isinstance(out, tuple) else out
print(df.groupby("idle_category")["idle_time"].sum().to_dict())
"""
JSON_SCRIPT = "import json, sys\nfor f in sys.argv[1:]:\n    d = json.load(open(f, 'rb'))\n"
ORJSON_SCRIPT = ("import orjson, sys\nfor f in sys.argv[1:]:\n"
                 "    with open(f, 'rb') as fh:\n        d = orjson.loads(fh.read())\n")
LOAD_SCRIPT = """
import sys
from profplug.analyzers.scale.load import load_timelines
print(len(load_timelines(sys.argv[2:], jobs=int(sys.argv[1]), progress=False)))
"""
ORJSON_PAR_SCRIPT = """
import orjson, sys
from concurrent.futures import ProcessPoolExecutor
def parse(f):
    with open(f, 'rb') as fh:
        return len(orjson.loads(fh.read())["traceEvents"])
if __name__ == "__main__":
    with ProcessPoolExecutor(len(sys.argv) - 1) as pool:
        print(sum(pool.map(parse, sys.argv[1:])))
"""


@dataclass
class Result:
    tool: str
    command: str
    wall_s: float
    peak_rss_mb: float  # sum over the process tree
    max_proc_rss_mb: float  # largest single process (ru_maxrss)
    cpu_s: float  # user + sys seconds of the whole tree
    cpu_per_wall: float
    max_procs: int
    status: str  # "ok", "> cap", "failed (rc N)"


# ---------------------------------------------------------------------------- measure
def _tree_rss(root: int) -> tuple[int, int]:
    """(RSS bytes summed over ``root`` and its descendants, process count)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(d)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * PAGE
    total, n, todo = 0, 0, [root]
    while todo:
        p = todo.pop()
        if p in rss:
            total += rss[p]
            n += 1
        todo.extend(children.get(p, []))
    return total, n


def measure(tool: str, cmd: list[str], cap: float) -> Result:
    """Run ``cmd`` as a fresh child; wall, peak tree RSS, CPU use."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    peak, procs, stop = [0], [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total, n = _tree_rss(proc.pid)
            peak[0], procs[0] = max(peak[0], total), max(procs[0], n)
            stop.wait(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    err = b""
    status = "ok"
    timer = threading.Timer(cap, os.killpg, (proc.pid, signal.SIGKILL))
    timer.start()
    err = proc.stderr.read() if proc.stderr else b""
    _, wstatus, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    timer.cancel()
    stop.set()
    th.join()
    proc.returncode = os.waitstatus_to_exitcode(wstatus)
    if wall >= cap:
        status = "> cap"
    elif proc.returncode != 0:
        status = f"failed (rc {proc.returncode})"
        print(f"{tool} failed:\n{err.decode(errors='replace')[-2000:]}", file=sys.stderr)
    short = " ".join(Path(c).name if c.startswith("/") and len(c) > 40 else c for c in cmd)
    return Result(tool, short if "\n" not in short else cmd[0] + " -c <script>", wall,
                  peak[0] / 1e6, ru.ru_maxrss / 1e3, ru.ru_utime + ru.ru_stime,
                  (ru.ru_utime + ru.ru_stime) / wall,
                  procs[0], status)


# ---------------------------------------------------------------------------- run
def hta_python(arg: str | None) -> str | None:
    cands = [arg] if arg else [sys.executable, "/tmp/hta-venv/bin/python"]
    for py in cands:
        if py and Path(py).exists() and subprocess.run(
                [py, "-c", "import hta"], capture_output=True).returncode == 0:
            return py
    return None


def trace_files(d: Path, mb: float, ranks: int, rebuild: bool, step_markers: bool = True,
                synthetic: bool = False) -> list[Path]:
    files = [d / f"rank{r}.pt.trace.json" for r in range(ranks)]
    if rebuild or not all(f.exists() and f.stat().st_size >= mb * 1e6 * 0.99 for f in files):
        for f in d.glob("*.json"):
            f.unlink()
        return build(d, mb, ranks, step_markers, synthetic)
    return files


def _has_profiler_steps(path: Path) -> bool:
    with open(path, "rb") as fh:
        return b'"ProfilerStep#' in fh.read(64 << 20)


def table(results: list[Result], ref: Result) -> str:
    rows = [f"{'tool':<34} {'wall s':>8} {'peak RSS MB':>11} {'max proc MB':>11} "
            f"{'cpu s':>7} {'cpu/wall':>8} {'vs profplug':>11}"]
    for r in results:
        capped = r.status == "> cap"  # killed: its workers' CPU was never collected
        wall = f"> {r.wall_s:.0f}" if capped else f"{r.wall_s:.2f}"
        cpu = "n/a" if capped else f"{r.cpu_s:.1f}"
        per = "n/a" if capped else f"{r.cpu_per_wall:.2f}"
        ratio = r.wall_s / ref.wall_s
        rs = f"{'>' if r.status == '> cap' else ''}{ratio:.2f}x"
        note = "" if r.status in ("ok", "> cap") else f"  {r.status}"
        rows.append(f"{r.tool:<34} {wall:>8} {r.peak_rss_mb:>11,.0f} {r.max_proc_rss_mb:>11,.0f} "
                    f"{cpu:>7} {per:>8} {rs:>11}{note}")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/profplug-bench"))
    ap.add_argument("--mb", type=float, default=300.0, help="MB per rank file")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--hta-python", default=None)
    ap.add_argument("--cap", type=float, default=600.0, help="seconds per tool")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--synthetic", action="store_true",
                    help="build from an enriched torch CPU run even if sample_traces/ has "
                         "real ones")
    ap.add_argument("--hta-steps-only", action="store_true",
                    help="skip the extra HTA run on a copy without ProfilerStep# markers")
    ap.add_argument("--skip", action="append", default=[],
                    help="hta, json, orjson, crossrank (repeat, or join with commas)")
    ap.add_argument("--json", type=Path, default=None, help="also write results here")
    a = ap.parse_args()
    a.skip = [x for s in a.skip for x in s.split(",")]

    files = trace_files(a.dir, a.mb, a.ranks, a.rebuild, synthetic=a.synthetic)
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    fs = [str(f) for f in files]
    py = sys.executable
    out = a.dir.with_name(a.dir.name + "-profplug-report.json")  # not in the trace dir
    runs: list[tuple[str, list[str]]] = [
        ("profplug report --format json", [py, "-m", "profplug", "report", "--format", "json",
                                           "--no-whatif", "--no-cross-rank", "-o", str(out), *fs])]
    runs.append(("profplug read only, 1 process", [py, "-c", LOAD_SCRIPT, "1", *fs]))
    runs.append((f"profplug read only, {a.ranks} processes",
                 [py, "-c", LOAD_SCRIPT, str(a.ranks), *fs]))
    hta = None if "hta" in a.skip else hta_python(a.hta_python)
    if hta:
        runs.append(("HTA load + idle_time_breakdown", [hta, "-c", HTA_SCRIPT, str(a.dir)]))
        if not a.hta_steps_only and _has_profiler_steps(files[0]):
            # HTA assigns each event to a ProfilerStep in a Python loop over all steps
            # (events x steps); also time it on the same trace with the steps renamed.
            ns_dir = a.dir.with_name(a.dir.name + "-nosteps")
            ns = [str(f) for f in trace_files(ns_dir, a.mb, a.ranks, a.rebuild, False,
                                              a.synthetic)]
            runs.append(("HTA, steps renamed", [hta, "-c", HTA_SCRIPT, str(ns_dir)]))
            runs.append(("profplug report, steps renamed",
                         [py, "-m", "profplug", "report", "--format", "json", "--no-whatif", "--no-cross-rank",
                          "-o", str(out), *ns]))
    elif "hta" not in a.skip:
        print("HTA not installed (pip install holistictraceanalysis): skipped", file=sys.stderr)
    if "json" not in a.skip:
        runs.append(("json.load (files in turn)", [py, "-c", JSON_SCRIPT, *fs]))
    if "orjson" not in a.skip:
        runs.append(("orjson.loads (files in turn)", [py, "-c", ORJSON_SCRIPT, *fs]))
        runs.append(("orjson.loads (1 process per file)", [py, "-c", ORJSON_PAR_SCRIPT, *fs]))

    results = []
    for tool, cmd in runs:
        print(f"running {tool} ...", file=sys.stderr, flush=True)
        results.append(measure(tool, cmd, a.cap))
    ref = results[0]
    print(f"\ntrace: {len(files)} rank file(s), {size_mb:,.0f} MB uncompressed JSON; "
          f"machine: {os.cpu_count()} cores\n")
    print(table(results, ref))
    print()
    checks = targets(results, ref, size_mb, len(files))
    for line in checks:
        print(line)
    one_rank = None if "crossrank" in a.skip else crossrank_one_rank(files[0])
    if a.json:
        a.json.write_text(json.dumps({"trace_mb": size_mb, "files": fs, "cores": os.cpu_count(),
                                      "results": [asdict(r) for r in results],
                                      "targets": checks, "crossrank_one_rank": one_rank},
                                     indent=1))


def crossrank_one_rank(path: Path) -> dict[str, float]:
    """Seconds of the cross-rank analysis on one rank, forced (before) and as the report
    runs it (after: skipped), in this process; the stall analysis for scale. Printed."""
    from profplug.analyzers.crossrank import cross_rank, cross_rank_analysis
    from profplug.analyzers.scale.load import load_timelines
    from profplug.analyzers.scale.rankpool import analyze_ranks
    from profplug.analyzers.stalls.rank import StallOptions

    tls = load_timelines([path], jobs=1, progress=False)
    opt = StallOptions()
    t0 = time.perf_counter()
    ranks = analyze_ranks(tls, opt)
    t1 = time.perf_counter()
    forced = cross_rank(tls, opt, ranks)
    t2 = time.perf_counter()
    skipped = cross_rank_analysis()(tls, opt, ranks=ranks)
    t3 = time.perf_counter()
    out = {"stall_s": t1 - t0, "before_forced_s": t2 - t1, "after_report_s": t3 - t2}
    mb = path.stat().st_size / 1e6
    print(f"\ncross-rank analysis on one rank ({path.name}, {mb:,.0f} MB), in one process:")
    print(f"{'stall analysis (for scale)':<34} {out['stall_s']:>8.3f} s")
    print(f"{'before: cross-rank forced':<34} {out['before_forced_s']:>8.3f} s  "
          f"({len(forced.ranks)} rank)")
    print(f"{'after: as the report runs it':<34} {out['after_report_s']:>8.3f} s  "
          f"({'skipped' if skipped is None else 'ran'})")
    return out


def targets(results: list[Result], ref: Result, size_mb: float, n_files: int) -> list[str]:
    """The issue's four targets, each PASS/FAIL with its figure."""
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    lines = []
    for hta in (r for r in results if r.tool.startswith("HTA")):
        if hta.status not in ("ok", "> cap"):
            continue
        pp = next((r for r in results if r.tool.startswith("profplug") and
                   ("renamed" in r.tool) == ("renamed" in hta.tool)), ref)
        x = hta.wall_s / pp.wall_s
        lines.append(f"{verdict(x >= 10)} >= 10x faster than {hta.tool}: "
                     f"{'>' if hta.status == '> cap' else ''}{x:.1f}x")
    bare = [r for r in results if r.tool.startswith(("json", "orjson")) and r.status == "ok"]
    if bare:
        best = min(bare, key=lambda r: r.wall_s)
        x = ref.wall_s / best.wall_s
        lines.append(f"{verdict(x <= 3)} within 3x of the fastest bare parse ({best.tool}): "
                     f"{x:.2f}x")
    x = ref.peak_rss_mb / size_mb
    lines.append(f"{verdict(x <= 2)} peak RSS <= 2x trace size: {ref.peak_rss_mb:,.0f} MB = "
                 f"{x:.2f}x of {size_mb:,.0f} MB")
    one = next((r for r in results if r.tool.startswith("profplug read only, 1 ")), None)
    many = next((r for r in results if r.tool.startswith("profplug read only")
                 and r is not one), None)
    if one is not None and many is not None:
        par = min(os.cpu_count() or 1, n_files)
        x = one.wall_s / many.wall_s
        lines.append(f"{verdict(par == 1 or x >= 0.75 * par)} ranks parsed in parallel: "
                     f"reading {n_files} files takes {one.wall_s:.2f} s in 1 process, "
                     f"{many.wall_s:.2f} s in {many.max_procs - 1} workers ({x:.2f}x) on "
                     f"{os.cpu_count()} cores; the full report ran {ref.max_procs} "
                     f"processes at most")
    return lines


if __name__ == "__main__":
    main()
