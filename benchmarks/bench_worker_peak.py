"""A worker's peak RSS on a pair of big ranks, this install against another one (e.g. the
previous commit's), in one run: the default report (the what-if on the workers),
``--no-whatif``, ``--dask local:2``; whether the JSON reports are the same.

    git archive HEAD~1 | tar -x -C /tmp/prev && pip install --no-deps --target /tmp/pp-prev /tmp/prev
    .venv/bin/python benchmarks/bench_worker_peak.py --other /tmp/pp-prev --mb 477,1000

Rank files as ``bench_scale.py`` makes them (the Megatron PP=2 sample's window repeated).
Run it from a folder other than the checkout's root (``python -m profplug`` would import the
checkout's ``profplug/`` first): the install under test is the one this interpreter imports,
the other is put first on ``PYTHONPATH``. One run per row: memory peaks repeat within a few
MB; the wall times are not a speed claim (the machine's run-to-run spread is +-30%).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import build_source, measure  # noqa: E402

TIMES = re.compile(r'"(replay_s|analysis_s)": [0-9.eE+-]+')
CASES = [("-j 2", ["-j", "2"], True), ("-j 2 --no-whatif", ["-j", "2", "--no-whatif"], False),
         ("--dask local:2", ["--dask", "local:2"], True)]


def _same(a: Path, b: Path) -> bool:
    def norm(p: Path) -> str:
        return TIMES.sub(r'"\1": 0', json.dumps(json.loads(p.read_text()), sort_keys=True))
    return norm(a) == norm(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/profplug-peak"))
    ap.add_argument("--mb", default="477,1000")
    ap.add_argument("--other", default="", help="site folder of the install to compare with")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    here = os.environ.get("PYTHONPATH", "")
    versions = {"this": here} | ({"other": os.pathsep.join(filter(None, [a.other, here]))}
                                 if a.other else {})
    print(f"{'trace':>8} {'install':<6} {'case':<18} {'wall s':>7} {'client MB':>9} "
          f"{'worker MB':>9} {'wkr/trace':>9} same")
    for mb in [float(x) for x in a.mb.split(",") if x]:
        pair = build_source(a.dir / f"pair-{mb:g}", mb)
        size = max(p.stat().st_size for p in pair) / 1e6
        for name, extra, both in CASES:
            outs = {}
            for v, path in versions.items():
                if v == "other" and not both:
                    continue
                out = a.dir / f"out-{mb:g}-{v}-{len(outs)}-{extra[-1]}.json"
                m = measure([sys.executable, "-m", "profplug", "report", str(pair[0].parent),
                             "-f", "json", "-q", "-o", str(out), *extra], {"PYTHONPATH": path})
                outs[v] = out
                same = "" if len(outs) < 2 else ("same" if _same(outs["this"], out) else "DIFF")
                print(f"{size:>6.0f}MB {v:<6} {name:<18} {m['wall_s']:>7.1f} "
                      f"{m['client_mb']:>9.0f} {m['worker_mb']:>9.0f} "
                      f"{m['worker_mb'] / size:>8.2f}x {same}", flush=True)


if __name__ == "__main__":
    main()
