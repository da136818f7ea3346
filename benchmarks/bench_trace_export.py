"""What ``--trace-out`` adds to ``profplug report``: wall, CPU and peak RSS, and the size of
the merged trace, on the big tiled benchmark trace.

    .venv/bin/python benchmarks/bench_trace_export.py --dir /tmp/te_big --mb 477 --rounds 5

Builds (once; reused while there) ``--ranks`` Kineto rank files of ``--mb`` MB with
``make_big_trace.py`` (real source: the Megatron PP=2 sample's window repeated), then runs,
as fresh child processes, ``--rounds`` interleaved rounds of: the report alone
(``report DIR -f json -q``), the report with ``--trace-out FILE.json`` and with
``--trace-out FILE.json.gz``; the order rotates each round, so a burst of load on the shared
machine falls on every case alike. Prints each case's median wall, CPU (user + sys of the
process tree) and peak RSS (the client's; the largest worker's), the median ratio to the
report alone of each round (wall and CPU: on a shared machine the CPU time is the steadier),
the files' sizes, the machine's load average over the runs, and the goals of issue 50 (at
most +50%, under 1 GB uncompressed). ``--zlib``: also the ``.gz`` without ``isal``. Peak RSS: the largest of any process of the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import measure  # noqa: E402

GOAL_WALL = 1.5  # report + --trace-out over the report alone
GOAL_BYTES = 1e9  # uncompressed merged trace


def build(d: Path, mb: float, ranks: int) -> list[Path]:
    files = sorted(d.glob("*.json*"))
    if len(files) != ranks:
        d.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_big_trace.py"), str(d),
                        "--mb", str(mb), "--ranks", str(ranks)], check=True)
        files = sorted(d.glob("*.json*"))
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/profplug-trace-export"))
    ap.add_argument("--mb", type=float, default=477.0)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("/tmp/profplug-trace-export-out"))
    ap.add_argument("--zlib", action="store_true",
                    help="also the .json.gz written without isal (the standard library's zlib)")
    a = ap.parse_args()
    files = build(a.dir / "traces", a.mb, a.ranks)
    a.out.mkdir(parents=True, exist_ok=True)
    json_out, gz_out = a.out / "merged.json", a.out / "merged.json.gz"
    base = [sys.executable, "-m", "profplug", "report", *map(str, files), "-f", "json", "-q",
            "-o", str(a.out / "report.json")]
    cases = {"report": base, "report --trace-out .json": [*base, "--trace-out", str(json_out)],
             "report --trace-out .json.gz": [*base, "--trace-out", str(gz_out)]}
    env: dict[str, dict[str, str]] = {}
    if a.zlib:  # the same .gz written by the standard library: isal hidden from the child
        hide = a.out / "no-isal"
        (hide / "isal").mkdir(parents=True, exist_ok=True)
        (hide / "isal" / "__init__.py").write_text("raise ImportError('hidden')\n")
        key = "report --trace-out .json.gz (zlib)"
        cases[key] = [*base, "--trace-out", str(a.out / "merged-zlib.json.gz")]
        env[key] = {"PYTHONPATH": os.pathsep.join(filter(None, [str(hide),
                                                                os.environ.get("PYTHONPATH")]))}
    got: dict[str, list[dict[str, float]]] = {k: [] for k in cases}
    loads = [os.getloadavg()[0]]
    names = list(cases)
    for r in range(a.rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            got[k].append(measure(cases[k], env.get(k)))
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1} {k}: {got[k][-1]['wall_s']:.1f} s", file=sys.stderr)
    gb = sum(f.stat().st_size for f in files) / 1e9
    print(f"{a.ranks} rank(s), {gb:.3f} GB of Kineto JSON; {a.rounds} interleaved rounds, "
          f"medians; {os.cpu_count()} CPUs; load average (1 min) during the runs: "
          f"{min(loads):.1f}-{max(loads):.1f}, median {statistics.median(loads):.1f}")
    table(got, names, json_out, gz_out)


def table(got: dict[str, list[dict[str, float]]], names: list[str], json_out: Path,
          gz_out: Path) -> None:
    """The medians, the ratios to the report alone, the sizes and the goals."""
    print(f"{'case':<36} {'wall s':>7} {'x report':>8} {'cpu s':>7} {'x report':>8} "
          f"{'peak RSS MB':>11}")
    ratios: dict[str, dict[str, float]] = {}
    for k, ms in got.items():
        med = {f: statistics.median(m[f] for m in ms) for f in ms[0]}
        # per round, against that round's report alone; the median of those
        ratios[k] = {f: statistics.median(m[f] / b[f] for m, b in
                                          zip(ms, got["report"], strict=True))
                     for f in ("wall_s", "cpu_s")}
        print(f"{k:<36} {med['wall_s']:>7.1f} {ratios[k]['wall_s']:>7.2f}x "
              f"{med['cpu_s']:>7.1f} {ratios[k]['cpu_s']:>7.2f}x "
              f"{max(med['client_mb'], med['worker_mb']):>11.0f}")
    size, zsize = json_out.stat().st_size, gz_out.stat().st_size
    try:
        import isal  # noqa: F401
        gz = "ISA-L (isal installed)"
    except ImportError:
        gz = "zlib (no isal)"
    print(f"merged trace: {size / 1e6:,.0f} MB uncompressed, {zsize / 1e6:,.0f} MB gzip "
          f"(level 1, {gz})")
    for f, what in (("wall_s", "wall"), ("cpu_s", "CPU")):
        worst = max(ratios[k][f] for k in names[1:])
        print(f"goal: {what} <= {GOAL_WALL:.2f}x the report's: {worst:.2f}x "
              f"{'met' if worst <= GOAL_WALL else 'NOT met'}")
    print(f"goal: uncompressed < {GOAL_BYTES / 1e9:g} GB: {size / 1e9:.2f} GB "
          f"{'met' if size < GOAL_BYTES else 'NOT met'}")


if __name__ == "__main__":
    main()
