"""CPU time of what shares a memo of one run's timelines (the NCCL matching, launch calls,
symbol kinds, policy masks) across several analyses, on synthetic pipelines and samples:

- ``report``: a report's run-level analyses over the timelines (the cross-rank analysis and
  the what-if, one matching between them), the ranks' stall analyses given;
- ``unprofiled``: ``whatif_unprofiled`` (its ~10 what-ifs of one run), at 0.8x the traced step.

    .venv/bin/python benchmarks/bench_shared_memo.py --baseline DIR  # and another checkout

Each figure is the best of ``REPEATS`` runs, after one untimed pass, in each of ``--rounds``
worker processes per checkout, the checkouts' workers alternated (as ``bench_whatif.py``);
process CPU time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

REPEATS = 3
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ("pp2_megatron_nsys/device", "pp2_infer_kineto/device")


def cases(tmp: Path) -> list[dict[str, object]]:
    from pipeline_synth import PipelineSpec, write

    out: list[dict[str, object]] = []
    for n in (8, 16):
        (tmp / f"pp{n}").mkdir()
        paths, _ = write(PipelineSpec(stages=n, steps=20, layers=16), tmp / f"pp{n}")
        out.append({"name": f"pipeline-{n}", "paths": [str(p) for p in paths]})
    out += [{"name": r, "paths": [str(ROOT / "sample_traces" / r)]} for r in SAMPLES
            if (ROOT / "sample_traces" / r).is_dir()]
    return out


def _best(fn: object) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def worker(case_file: str) -> int:
    from profplug.analyzers import cross_rank_analysis
    from profplug.analyzers.report.analysis import analyze_timelines
    from profplug.analyzers.scale.load import load_timelines
    from profplug.analyzers.stalls.rank import analyze_rank
    from profplug.analyzers.whatif import whatif, whatif_analysis, whatif_unprofiled

    for c in json.loads(Path(case_file).read_text()):
        tls = load_timelines(c["paths"], jobs=1, progress=False)
        ranks = [analyze_rank(t) for t in tls]
        step = 0.8 * max(r.recorded_us for r in whatif(tls).ranks)

        def report() -> None:
            analyze_timelines(tls, run=[cross_rank_analysis(), whatif_analysis()],  # noqa: B023
                              ranks=ranks)  # noqa: B023

        def unprofiled() -> None:
            whatif_unprofiled(tls, step)  # noqa: B023

        report()
        unprofiled()  # untimed: a fresh process's first passes run cold
        print(json.dumps({"name": c["name"], "report": _best(report),
                          "unprofiled": _best(unprofiled)}), flush=True)
    return 0


def _run(python: str, case_file: Path, cwd: Path) -> dict[str, dict[str, float]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([python, str(Path(__file__).resolve()), "--worker", str(case_file)],
                         capture_output=True, text=True, cwd=cwd, env=env, check=False)
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {r["name"]: r for r in rows}


def _keep_best(acc: dict[str, dict[str, float]], rows: dict[str, dict[str, float]]) -> None:
    for name, r in rows.items():
        if name not in acc:
            acc[name] = dict(r)
        else:
            for k in ("report", "unprofiled"):
                acc[name][k] = min(acc[name][k], r[k])


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return worker(argv[1])
    baseline, rounds = None, 3
    while argv[:1] in (["--baseline"], ["--rounds"]):
        if argv[0] == "--baseline":
            baseline = Path(argv[1]).resolve()
        else:
            rounds = int(argv[1])
        argv = argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        case_file = Path(tmp) / "cases.json"
        case_file.write_text(json.dumps(cases(Path(tmp))))
        now: dict[str, dict[str, float]] = {}
        before: dict[str, dict[str, float]] = {}
        for _ in range(rounds):
            _keep_best(now, _run(sys.executable, case_file, ROOT))
            if baseline:
                _keep_best(before, _run(str(baseline / ".venv" / "bin" / "python"),
                                        case_file, baseline))
    print(f"{'case':<28} {'report s':>9} {'unprof s':>9}"
          + (f" {'base rep':>9} {'base unp':>9}" if baseline else ""))
    for name, r in now.items():
        b = before.get(name)
        line = f"{name:<28} {r['report']:>9.3f} {r['unprofiled']:>9.3f}"
        if baseline and b:
            line += f" {b['report']:>9.3f} {b['unprofiled']:>9.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
