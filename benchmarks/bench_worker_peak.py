"""A worker's and the client's peak RSS on a pair of big ranks, this install against another
one (e.g. the previous commit's), in one run: the default report (the what-if on the
workers), ``--no-whatif``, ``--dask local:2``, each with a page (``--html``) too; whether the
JSON reports (and the pages, but for their timings) are the same.

    git archive HEAD~1 | tar -x -C /tmp/prev && pip install --no-deps --target /tmp/pp-prev /tmp/prev
    .venv/bin/python benchmarks/bench_worker_peak.py --other /tmp/pp-prev --mb 477,1000
    .venv/bin/python benchmarks/bench_worker_peak.py --cases html   # the page cases only

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
PAGE_TIMES = re.compile(r'("(?:replay_s|analysis_s)": ?)[0-9.eE+-]+|replayed in [0-9.,]+ s')
CASES = [("-j 2", ["-j", "2"], True), ("-j 2 --no-whatif", ["-j", "2", "--no-whatif"], False),
         ("--dask local:2", ["--dask", "local:2"], True),
         ("-j 2 --html", ["-j", "2", "--html"], True),
         ("-j 2 --no-whatif --html", ["-j", "2", "--no-whatif", "--html"], True),
         ("--dask local:2 --html", ["--dask", "local:2", "--html"], True)]


def _same(a: Path, b: Path) -> bool:
    def norm(p: Path) -> str:
        return TIMES.sub(r'"\1": 0', json.dumps(json.loads(p.read_text()), sort_keys=True))

    def page(p: Path) -> str:
        return PAGE_TIMES.sub(lambda m: (m.group(1) or "replayed in ") + "0", p.read_text())

    pages = [x.with_suffix(".html") for x in (a, b)]
    return norm(a) == norm(b) and (not pages[0].exists() or page(pages[0]) == page(pages[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/profplug-peak"))
    ap.add_argument("--mb", default="477,1000")
    ap.add_argument("--other", default="", help="site folder of the install to compare with")
    ap.add_argument("--cases", default="", help="only the cases whose name has this text")
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
            if a.cases not in name:
                continue
            outs = {}
            for v, path in versions.items():
                if v == "other" and not both:
                    continue
                out = a.dir / f"out-{mb:g}-{v}-{len(outs)}-{extra[-1]}.json"
                args = [*extra, str(out.with_suffix(".html"))] if extra[-1] == "--html" \
                    else extra
                m = measure([sys.executable, "-m", "profplug", "report", str(pair[0].parent),
                             "-f", "json", "-q", "-o", str(out), *args], {"PYTHONPATH": path})
                outs[v] = out
                same = "" if len(outs) < 2 else ("same" if _same(outs["this"], out) else "DIFF")
                print(f"{size:>6.0f}MB {v:<6} {name:<18} {m['wall_s']:>7.1f} "
                      f"{m['client_mb']:>9.0f} {m['worker_mb']:>9.0f} "
                      f"{m['worker_mb'] / size:>8.2f}x {same}", flush=True)


if __name__ == "__main__":
    main()
