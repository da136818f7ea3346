"""The what-if where the ranks are read (``whatif/rounds.py``) against the what-if in the
client, on many synthetic ranks and on a pair of big ones: wall, CPU, client and worker
peak RSS, and whether the JSON reports are the same.

    .venv/bin/python benchmarks/bench_whatif_rounds.py --dir /tmp/profplug-scale \\
        --ranks 64,256 --mb 20 --pair-mb 477

Rank files as ``bench_scale.py`` makes them (the Megatron PP=2 sample's window repeated,
rank r a copy of real rank r % 2). Cases, each a fresh ``profplug report -f json`` child:

- ``in client``: ``--whatif`` with ``$PROFPLUG_ROUNDS_MIN_BYTES`` past the run's size, so
  every rank's timeline travels and the what-if runs in the client (the peer: the path of
  every run under the threshold);
- ``on workers``: the default report (past ``placement.ROUNDS_MIN_BYTES``: the cross-rank
  analysis and the what-if where the ranks are read); ``--dask local:N`` too;
- the pair: ``--dask local:2``, one worker per big rank: a worker's peak over its trace.

Columns as ``bench_scale.py``'s; ``same`` compares each report with the in-client one
(wall-time fields zeroed).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import HEADER, PROFPLUG, build_run, build_source, measure, row  # noqa: E402

TIMES = re.compile(r'"(replay_s|analysis_s)": [0-9.eE+-]+')
NEVER = {"PROFPLUG_ROUNDS_MIN_BYTES": str(10**15)}  # the what-if in the client


def report(out: Path) -> str:
    return TIMES.sub(r'"\1": 0', json.dumps(json.loads(out.read_text()), sort_keys=True))


def cases(files: list[Path], tmp: Path, n: int, label: str) -> list[str]:
    d = str(files[0].parent)
    runs = [("in client, --whatif", ["-j", str(n), "--whatif"], NEVER),
            ("on workers, default", ["-j", str(n)], None),
            (f"on workers, default --dask local:{n}", ["--dask", f"local:{n}"], None)]
    lines, first = [], None
    for name, extra, env in runs:
        out = tmp / f"{label}-{len(lines)}.json"
        m = measure([*PROFPLUG, "report", d, "-f", "json", "-q", "-o", str(out), *extra], env)
        got = report(out)
        first = first or got
        doc = json.loads(out.read_text())
        tag = "whatif" if "whatif" in doc else "NO WHATIF"
        lines.append(f"{row(f'{label}: {name}', len(files), files, m)} "
                     f"{'same' if got == first else 'DIFF'} {tag}")
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/profplug-scale"))
    ap.add_argument("--ranks", default="64,256")
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--pair-mb", type=float, default=477.0, help="0: no pair")
    ap.add_argument("--workers", type=int, default=0)
    a = ap.parse_args()
    from profplug.analyzers.core.cpus import usable_cpus

    n = a.workers or usable_cpus()
    tmp = a.dir / "rounds-out"
    tmp.mkdir(parents=True, exist_ok=True)
    lines = [f"{HEADER} same whatif"]
    src = build_source(a.dir / f"src-{a.mb:g}", a.mb)
    for r in [int(x) for x in a.ranks.split(",") if x]:
        lines += cases(build_run(src, a.dir / f"run{r}-{a.mb:g}", r), tmp, n, f"{r} ranks")
    if a.pair_mb:
        pair = build_source(a.dir / f"pair-{a.pair_mb:g}", a.pair_mb)
        lines += cases(pair, tmp, 2, f"pair {a.pair_mb:g} MB")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
