"""Scale-out benchmark: many synthetic ranks on the local pool vs ``--dask local:N``, the
cached re-run, per-worker and client memory; and the cache on one big trace.

    .venv/bin/python benchmarks/bench_scale.py --dir /tmp/profplug-scale --ranks 64,256 \\
        --mb 20 --big-mb 477

1. Builds two real-source rank files of ``--mb`` MB with ``make_big_trace.build`` (the
   Megatron PP=2 sample's whole window, repeated), then every run of R ranks as copies of
   them with ``distributedInfo.rank`` rewritten (rank r is real rank r % 2): generated, not
   shipped; reused while the files are there.
2. Runs each case as a fresh ``profplug report -f json -q`` child, one after the other:
   the local pool (``-j N``), ``--dask local:N`` (N = the usable CPUs, or ``--workers``),
   ``--cache`` cold (parse and write) and warm (the cached re-run). The per-rank phase is
   what scales, so these run ``--no-whatif --no-cross-rank`` (only the compact per-rank
   results travel back); on the smallest run the report with its run-level analyses
   (timelines travel back) is measured too, and with ``--whatif`` (the default report
   skips the what-if past 2M events: 64 ranks of 20 MB are 2.4M).
3. ``--big-mb``: one rank of that size, the default report first without a cache, then
   ``--cache`` cold and warm (issue 29's goal: warm <= 0.2x the first report); the same
   per-rank only; a ``--dask local:1`` worker's peak on it (goal: <= 0.5x the trace). The
   last table is the goals: figure, bound, met. Each big-trace case runs ``--repeat``
   times (default 3): its least wall and CPU time (the run the machine's other load slowed
   least) and its most memory.
4. The size of what travels back per rank: the pickled RankResult, the Timeline as
   compressed npz (what ``--dask`` sends when run-level analyses are on) and uncompressed.

Columns: wall s (spawn to exit); s/GB = wall / GB of trace; cpu s = user+sys of the tree;
client MB = peak RSS (VmHWM) of the profplug process; worker MB = the largest peak RSS of
any other process of its tree (a pool worker, a Dask worker or nanny); worker / trace = that
over the largest trace file a worker read.
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
PROFPLUG = [sys.executable, "-m", "profplug"]
COMPACT = ["--no-whatif", "--no-cross-rank"]


def build_source(outdir: Path, mb: float) -> list[Path]:
    from make_big_trace import build

    files = sorted(outdir.glob("rank*.pt.trace.json"))
    if len(files) == 2:
        return files
    return build(outdir, mb, 2)


def build_run(src: list[Path], outdir: Path, ranks: int) -> list[Path]:
    """R rank files: copies of the sources with distributedInfo.rank = r."""
    outdir.mkdir(parents=True, exist_ok=True)
    out = []
    for r in range(ranks):
        dst = outdir / f"rank{r}.pt.trace.json"
        out.append(dst)
        if dst.is_file():
            continue
        with open(src[r % len(src)], "rb") as fh, open(dst, "wb") as w:
            head = fh.read(1 << 16).decode()
            head = re.sub(r'("distributedInfo": \{[^}]*?"rank": )\d+', rf"\g<1>{r}", head,
                          count=1)
            w.write(head.encode())
            shutil.copyfileobj(fh, w, 1 << 22)
    return out


def _procs() -> dict[int, int]:
    """pid -> ppid of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", "rb") as fh:
                    out[int(d)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return out


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Run ``cmd`` (``env``: added to this environment); wall, cpu, the client's and the
    largest other process's peak RSS."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=None if env is None else {**os.environ, **env})
    peaks: dict[int, int] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            parents = _procs()
            todo, tree = [proc.pid], []
            while todo:
                p = todo.pop()
                tree.append(p)
                todo.extend(c for c, pp in parents.items() if pp == p)
            for p in tree:
                peaks[p] = max(peaks.get(p, 0), _hwm(p))
            stop.wait(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    err = proc.stderr.read() if proc.stderr else b""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err.decode(errors='replace')[-2000:]}")
    client = max(peaks.get(proc.pid, 0), ru.ru_maxrss * 1024 if not peaks else 0)
    workers = [v for p, v in peaks.items() if p != proc.pid]
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "client_mb": client / 1e6,
            "worker_mb": max(workers, default=0) / 1e6}


def row(case: str, ranks: int, files: list[Path], m: dict[str, float]) -> str:
    gb = sum(f.stat().st_size for f in files) / 1e9
    big = max(f.stat().st_size for f in files) / 1e6
    ratio = f"{m['worker_mb'] / big:.2f}x" if m["worker_mb"] else "-"
    return (f"{case:<42} {ranks:>5} {gb:>6.2f} {m['wall_s']:>7.1f} {m['wall_s'] / gb:>6.1f} "
            f"{m['cpu_s']:>7.1f} {m['client_mb']:>9.0f} {m['worker_mb']:>9.0f} {ratio:>9}")


HEADER = (f"{'case':<42} {'ranks':>5} {'GB':>6} {'wall s':>7} {'s/GB':>6} {'cpu s':>7} "
          f"{'client MB':>9} {'worker MB':>9} {'wkr/trace':>9}")


def travel_sizes(f: Path) -> str:
    """Bytes per rank of what travels back, for one rank file."""
    from profplug.analyzers.scale.load import load_timelines
    from profplug.analyzers.stalls.rank import StallOptions, analyze_rank

    (tl,) = load_timelines(f, jobs=1, progress=False)
    st = analyze_rank(tl, StallOptions())
    comp, raw = io.BytesIO(), io.BytesIO()
    tl.save(comp)
    tl.save(raw, compress=False)
    events = tl.n_gpu + tl.api_start_ns.size + tl.ann_start_ns.size
    return (f"per rank ({f.stat().st_size / 1e6:.0f} MB trace, {events:,} events): "
            f"RankResult pickled {len(pickle.dumps(st)) / 1e3:,.0f} KB; Timeline npz "
            f"compressed {comp.tell() / 1e6:.1f} MB, uncompressed {raw.tell() / 1e6:.1f} MB")


def per_event_line(src: list[Path], ranks: int, n: int, client: dict[str, float]) -> str:
    """The client's peak with the run-level analyses over the per-rank report's, per event
    they replay (API calls + GPU ops of every rank, as the what-if counts them)."""
    from profplug.analyzers.scale.load import load_timelines

    per_src = [tl.n_gpu + int(tl.api_start_ns.size)
               for f in src for tl in load_timelines(f, jobs=1, progress=False)]
    events = sum(per_src[r % len(per_src)] for r in range(ranks))
    base = client[f"local pool -j {n}"]
    parts = [f"{name.split(', ', 1)[1]} {(client[name] - base) * 1e6 / events:,.0f} B"
             for name in (f"local -j {n}, run-level analyses", f"local -j {n}, run-level, --whatif",
                          f"local -j {n}, cross-rank on workers")]
    return (f"client peak over the per-rank report's, per event ({ranks} ranks, {events:,} API "
            f"calls + GPU ops): {'; '.join(parts)}")


READ_ONLY = """
import sys, time
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.readers.base import ReadOptions
t = time.perf_counter()
load_timelines(sys.argv[1], jobs=1, progress=False, read=ReadOptions(cache_dir=sys.argv[2] or None))
print(time.perf_counter() - t)
"""


def best_of(cmd: list[str], repeat: int, before: Callable[[], None] | None = None
            ) -> dict[str, float]:
    """``measure(cmd)`` ``repeat`` times (``before`` each): the least wall and CPU time (the
    run least slowed by the machine's other load), the most memory (the bound)."""
    got = []
    for _ in range(repeat):
        if before is not None:
            before()
        got.append(measure(cmd))
    return {k: (max if k.endswith("_mb") else min)(m[k] for m in got) for k in got[0]}


def big_trace(root: Path, mb: float, repeat: int = 1) -> list[str]:
    """One big rank: the report first, then cold and warm through the cache; the same
    without run-level analyses; the read alone (in the process: no interpreter start);
    a Dask worker's peak on it, with and without its Timeline sent back. Ends with the
    table of issue 29's two measured goals."""
    bdir = root / f"big-{mb:g}"
    bfiles = sorted(bdir.glob("rank*.pt.trace.json"))
    if not bfiles:
        src = build_source(root / f"bigsrc-{mb:g}", mb)
        bfiles = build_run(src, bdir, 1)
        shutil.rmtree(src[0].parent)
    cache = root / "cache-big"
    shutil.rmtree(cache, ignore_errors=True)
    base = [*PROFPLUG, "report", str(bdir), "-f", "json", "-o", os.devnull, "-q"]
    c = ["--cache", str(cache)]
    def clear() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    runs = [("big: report (first, no cache)", base), ("big: report --cache (cold)", [*base, *c]),
            ("big: report --cache (warm re-run)", [*base, *c]),
            ("big: per-rank only, no cache", [*base, *COMPACT]),
            ("big: per-rank only --cache (warm)", [*base, *COMPACT, *c]),
            ("big: per-rank only --dask local:1", [*base, *COMPACT, "--dask", "local:1"]),
            ("big: report --dask local:1", [*base, "--dask", "local:1"])]
    # two big ranks (a real pair): the cross-rank analysis's second round on a worker
    b2dir = root / f"big2-{mb:g}"
    b2files = sorted(b2dir.glob("rank*.pt.trace.json"))
    if len(b2files) != 2:
        src = build_source(root / f"big2src-{mb:g}", mb)
        b2files = build_run(src, b2dir, 2)
        shutil.rmtree(src[0].parent)
    runs.append(("big x2: cross-rank on workers --dask local:2",
                 [*PROFPLUG, "report", str(b2dir), "-f", "json", "-o", os.devnull, "-q",
                  "--no-whatif", "--dask", "local:2"]))
    got = {name: best_of(cmd, repeat, clear if "(cold)" in name else None)
           for name, cmd in runs}
    out = [row(name, 2 if "x2" in name else 1, b2files if "x2" in name else bfiles, m)
           for name, m in got.items()]
    reads = [float(subprocess.run([sys.executable, "-c", READ_ONLY, str(bdir), d],
                                  capture_output=True, text=True, check=True).stdout)
             for d in ("", str(cache))]
    entries = list(cache.iterdir())
    size = sum(p.stat().st_size for p in entries) / 1e6
    trace_mb = bfiles[0].stat().st_size / 1e6
    out += [f"the read alone: {reads[0]:.2f} s parsed, {reads[1]:.2f} s cached = "
            f"{reads[1] / reads[0]:.2f}x; cache {size:.0f} MB in {len(entries)} entries for a "
            f"{trace_mb:.0f} MB trace"]
    shutil.rmtree(cache, ignore_errors=True)
    return [*out, "", *goals(got, trace_mb)]


def goals(got: dict[str, dict[str, float]], trace_mb: float) -> list[str]:
    """Issue 29's measured goals on the big trace, one line each: figure, bound, met."""
    def wall(name: str) -> float:
        return got[f"big: {name}"]["wall_s"]

    def worker(name: str) -> float:
        return got[f"big: {name}"]["worker_mb"] / trace_mb

    lines = [("Dask worker peak RSS / trace, per-rank report", worker("per-rank only --dask "
                                                                     "local:1"), 0.5),
             ("Dask worker peak RSS / trace, default report", worker("report --dask local:1"),
              0.5),
             ("Dask worker peak RSS / trace, cross-rank on workers",
              got["big x2: cross-rank on workers --dask local:2"]["worker_mb"] / trace_mb, 0.5),
             ("cached re-run / first report, default report",
              wall("report --cache (warm re-run)") / wall("report (first, no cache)"), 0.2),
             ("cached re-run / first report, per-rank report",
              wall("per-rank only --cache (warm)") / wall("per-rank only, no cache"), 0.2)]
    head = f"{'goal (issue 29), ' + f'{trace_mb:.0f} MB trace':<52} {'figure':>7} {'bound':>7}  met"
    return [head, *(f"{n:<52} {v:>6.2f}x {b:>6.2f}x  {'yes' if v <= b else 'NO'}"
                    for n, v, b in lines)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/profplug-scale"))
    ap.add_argument("--ranks", default="64,256", help="rank counts, comma-separated")
    ap.add_argument("--mb", type=float, default=20.0, help="MB per rank file")
    ap.add_argument("--workers", type=int, default=0, help="N (default: usable CPUs)")
    ap.add_argument("--big-mb", type=float, default=477.0, help="0: skip the big trace")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each big-trace case: the least time, the most memory")
    a = ap.parse_args()
    from profplug.analyzers.core.cpus import usable_cpus

    n = a.workers or usable_cpus()
    counts = [int(x) for x in a.ranks.split(",") if x]  # "": the big trace only
    src = build_source(a.dir / f"src-{a.mb:g}", a.mb) if counts else []
    lines = [HEADER]
    client: dict[str, float] = {}
    per_event = ""
    for r in counts:
        files = build_run(src, a.dir / f"run{r}-{a.mb:g}", r)
        d = str(files[0].parent)
        cache = a.dir / f"cache{r}-{a.mb:g}"
        shutil.rmtree(cache, ignore_errors=True)
        base = [*PROFPLUG, "report", d, "-f", "json", "-o", os.devnull, "-q"]
        cases = [(f"local pool -j {n}", [*base, *COMPACT, "-j", str(n)]),
                 (f"--dask local:{n}", [*base, *COMPACT, "--dask", f"local:{n}"]),
                 (f"local -j {n} --cache (cold)", [*base, *COMPACT, "-j", str(n),
                                                   "--cache", str(cache)]),
                 (f"local -j {n} --cache (warm re-run)", [*base, *COMPACT, "-j", str(n),
                                                         "--cache", str(cache)])]
        # the default report: from 500 MB of traces (placement.ROUNDS_MIN_BYTES) the
        # cross-rank analysis and the what-if run on the workers; --no-whatif: always
        cases += [(f"local -j {n}, run-level analyses", [*base, "-j", str(n)]),
                  (f"local -j {n}, cross-rank on workers", [*base, "-j", str(n),
                                                           "--no-whatif"]),
                  # a page: its analyses where the ranks are read too (docs/scale.md)
                  (f"local -j {n}, run-level, --html", [*base, "-j", str(n), "--html",
                                                       str(a.dir / f"page{r}.html")])]
        if r == min(counts):
            # the default report runs the what-if up to 2M events (report/registry.py); --whatif
            # runs it past that too: the client's peak of both run-level analyses
            cases += [(f"--dask local:{n}, cross-rank on workers",
                       [*base, "--dask", f"local:{n}", "--no-whatif"]),
                      (f"local -j {n}, run-level, --whatif", [*base, "-j", str(n),
                                                            "--whatif"]),
                      (f"--dask local:{n}, run-level analyses",
                       [*base, "--dask", f"local:{n}"]),
                      ("run-level --cache (ranks cached)", [*base, "-j", str(n), "--cache",
                                                       str(cache)]),
                      ("run-level --cache (all cached)", [*base, "-j", str(n), "--cache",
                                                             str(cache)])]
        for name, cmd in cases:
            got = measure(cmd)
            lines.append(row(name, r, files, got))
            print(lines[-1], file=sys.stderr)
            client[name] = got["client_mb"]
        if r == min(counts):
            per_event = per_event_line(src, r, n, client)
        shutil.rmtree(cache, ignore_errors=True)
    sizes = travel_sizes(src[0]) if counts else ""
    big_lines = []
    if a.big_mb:
        big_lines = big_trace(a.dir, a.big_mb, a.repeat)
    print(f"\n{os.cpu_count()} cores, N = {n} workers; rank files of ~{a.mb:g} MB "
          f"(real-source Kineto)\n")
    print("\n".join([*lines, *big_lines]))
    print(f"\n{sizes}")
    if per_event:
        print(per_event)


if __name__ == "__main__":
    main()
