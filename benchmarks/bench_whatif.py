"""Speed of the what-if (model build + both replays + the per-rank comparison, excluding trace
parsing), in us per event (API calls + GPU ops), on:

- ``synthetic xK``: a synthetic 30-step PP=2 decode loop replicated K = 1, 2, 4 times (a replica
  is the run's timelines repeated back to back in time, correlation ids and row indices
  offset, so the model sees K times the events with the same structure);
- ``pipeline-N``: 8- and 16-stage synthetic pipelines (``tests/synth/pipeline.py``);
- the sample runs (``sample_traces/``), or the runs given on the command line;
- ``pp2_infer_kineto/device x40``: that real two-rank sample tiled 40 times back to back, 50 ms
  of nothing between copies (each rank replicated as in ``synthetic xK``; the tiled trace of
  ``tests/integration/test_tiled_sample.py``); after the table, per checkout, its *marginal*
  cost against the sample itself (x1): ``(s(x40) - s(x1)) / (events(x40) - events(x1))`` in
  us per event, what each further event costs without the what-if's fixed costs.

    .venv/bin/python benchmarks/bench_whatif.py                       # this checkout
    .venv/bin/python benchmarks/bench_whatif.py --baseline /work/main # and another, side by side
    .venv/bin/python benchmarks/bench_whatif.py RUN_DIR ...           # these runs only
    .venv/bin/python benchmarks/bench_whatif.py --rounds 9 --baseline DIR  # a busy host

``--baseline DIR`` times the same cases in one more process with ``DIR/.venv/bin/python``
(that checkout's own profplug) and prints both columns and the speed-up (``x``). ``report s``:
the what-if as ``report`` runs it, with the ranks' stall analyses given (a checkout whose
``whatif`` cannot take them redoes them: the same as ``s``); ``x rep`` compares those. Each
figure is the best of ``REPEATS`` runs (after one untimed pass over every case: a fresh
process's first what-ifs run cold, up to 2x slower while its heap grows, so the first cases
measured the process's warm-up) in each of ``ROUNDS`` (``--rounds``) worker processes per
checkout, the two checkouts' workers alternated (a change of load on a shared host hits both), in process CPU time
(steadier than wall time on a shared host; more rounds on a busy one, where another
process's burst inflates a round's CPU time through shared caches).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

try:
    from profplug.analyzers.core.timeline import Timeline
    from profplug.analyzers.scale.load import load_timelines
    from profplug.analyzers.stalls.rank import analyze_rank
except ModuleNotFoundError:  # a --baseline checkout from before the packages by idea
    from profplug.analyzers.load import load_timelines
    from profplug.analyzers.stalls import analyze_rank
    from profplug.analyzers.timeline import Timeline
from profplug.analyzers.whatif import whatif

NCCL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


def synthetic_run(out: Path, steps: int = 30, layers: int = 80) -> list[Path]:
    """A Megatron-like PP=2 decode loop with a device sync after every send/recv (us)."""
    from synth import KinetoTrace

    r0, r1 = KinetoTrace(rank=0), KinetoTrace(rank=1)
    h0 = h1 = 0.0  # host clocks
    g0 = g1 = 0.0  # compute stream ends
    n0 = n1 = 0.0  # nccl stream ends

    def forward(t: KinetoTrace, h: float, g: float) -> tuple[float, float]:
        for _ in range(layers):
            start = max(h + 5.0, g)
            t.launch(h, start, 12.0)
            h, g = h + 8.0, start + 12.0
        return h, g

    def p2p(t: KinetoTrace, h: float, nccl_end: float, g: float) -> tuple[float, float]:
        t.runtime("cudaStreamWaitEvent", h, 1.0)  # NCCL stream waits for compute
        corr = t.runtime("cudaLaunchKernel", h + 2, 3.0)
        t.runtime("cudaStreamWaitEvent", h + 6, 1.0, corr=corr + 1000_000)  # req.wait()
        t._corr = corr  # the kernel below takes the launch's correlation id
        return h + 8.0, max(h + 7.0, nccl_end, g)  # host after the wait, kernel start

    for k in range(steps):
        s0, s1 = h0, h1
        h0, g0 = forward(r0, h0, g0)
        h0, a = p2p(r0, h0, n0, g0)  # send activations
        h1, b = p2p(r1, h1, n1, g1)  # recv activations
        end = max(a, b) + 10.0
        for t, st in ((r0, a), (r1, b)):
            t.gpu(st, end - st, NCCL, stream=20, corr=t._corr)
        n0 = n1 = g1 = end
        r0.runtime("cudaDeviceSynchronize", h0, end + 5.0 - h0)
        r1.runtime("cudaDeviceSynchronize", h1, max(end + 5.0 - h1, 2.0))
        h0, h1 = end + 5.0 + 10.0, max(end + 5.0, h1 + 2.0) + 10.0
        h1, g1 = forward(r1, h1, g1)
        h1, a = p2p(r1, h1, n1, g1)  # send result back
        h0, b = p2p(r0, h0, n0, g0)
        end = max(a, b) + 10.0
        for t, st in ((r1, a), (r0, b)):
            t.gpu(st, end - st, NCCL, stream=20, corr=t._corr)
        n0 = n1 = g0 = end
        r1.runtime("cudaDeviceSynchronize", h1, end + 5.0 - h1)
        r0.runtime("cudaDeviceSynchronize", h0, max(end + 5.0 - h0, 2.0))
        h0, h1 = max(end + 5.0, h0 + 2.0) + 10.0, end + 5.0 + 10.0
        r0.annotation(f"ProfilerStep#{k}", s0, h0 - s0)
        r1.annotation(f"ProfilerStep#{k}", s1, h1 - s1)
    return [r0.write(out / "bench_rank0.json"), r1.write(out / "bench_rank1.json")]


def replicate(tl: Timeline, k: int, gap_ns: int = 1_000) -> Timeline:
    """``tl`` repeated ``k`` times back to back, ``gap_ns`` of nothing between copies (a
    server between requests); correlation ids and step numbers offset."""
    if k == 1:
        return tl
    lo = min(int(a.min()) for a in (tl.gpu_start_ns, tl.api_start_ns) if a.size)
    hi = max(int(a.max()) for a in (tl.gpu_end_ns, tl.api_end_ns) if a.size)
    span = hi - lo + gap_ns
    cspan = int(max(tl.api_corr.max(initial=0), tl.gpu_corr.max(initial=0))) + 1
    nspan = int(tl.step_num.max(initial=0)) + 1
    cols: dict[str, np.ndarray] = {}
    for name in Timeline._ARRAYS:
        a = getattr(tl, name)
        parts = []
        for i in range(k):
            if name.endswith("_ns"):
                parts.append(a + i * span)
            elif name in ("gpu_corr", "api_corr", "gsync_corr", "gsync_wait_corr"):
                parts.append(np.where(a >= 0, a + i * cspan, a))
            elif name == "step_num":
                parts.append(a + i * nspan)
            elif name == "api_top":  # an index into the API calls: the copy's own
                parts.append(a + i * tl.api_start_ns.size)
            else:
                parts.append(a)
        cols[name] = np.concatenate(parts)
    return replace(tl, **cols)


REPEATS = 3
ROUNDS = 3  # worker processes per checkout, alternated; the best of all their repeats
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ("pp2_megatron_kineto/device", "pp2_megatron_nsys/device", "pp2_infer_kineto/device",
           "pp2_infer_nsys/device", "h200_three_waits/kineto", "h200_megatron_pp1_kineto/device")
TILED, COPIES, IDLE_NS = "pp2_infer_kineto/device", 40, 50_000_000  # the marginal's case


def cases(tmp: Path, runs: list[str]) -> list[dict[str, object]]:
    """The cases as plain data (name, trace paths, copies), written under ``tmp``."""
    if runs:
        return [{"name": Path(r).name, "paths": [r], "k": 1} for r in runs]
    from synth.pipeline import PipelineSpec, write

    for d in ("synthetic", "pp8", "pp16"):
        (tmp / d).mkdir()
    syn = [str(p) for p in synthetic_run(tmp / "synthetic")]
    out: list[dict[str, object]] = [{"name": f"synthetic x{k}", "paths": syn, "k": k}
                                    for k in (1, 2, 4)]
    for n in (8, 16):
        paths, _ = write(PipelineSpec(stages=n, steps=20, layers=16), tmp / f"pp{n}")
        out.append({"name": f"pipeline-{n}", "paths": [str(p) for p in paths], "k": 1})
    for r in SAMPLES:
        if (ROOT / "sample_traces" / r).is_dir():
            out.append({"name": r, "paths": [str(ROOT / "sample_traces" / r)], "k": 1})
    if (ROOT / "sample_traces" / TILED).is_dir():
        out.append({"name": f"{TILED} x{COPIES}", "paths": [str(ROOT / "sample_traces" / TILED)],
                    "k": COPIES, "gap_ns": IDLE_NS})
    return out


def worker(case_file: str) -> int:
    """Time every case with this interpreter's profplug; one JSON line per case."""
    runs = []
    for c in json.loads(Path(case_file).read_text()):
        base = load_timelines(c["paths"], jobs=1, progress=False)
        runs.append((c, [replicate(t, int(c["k"]), int(c.get("gap_ns", 1_000))) for t in base]))
        whatif(runs[-1][1])  # untimed: a fresh process's first what-ifs run cold (see above)
    for c, tls in runs:
        res = whatif(tls)
        best = float("inf")
        for _ in range(REPEATS):
            t0 = time.process_time()  # CPU time: steadier than wall time on a shared host
            res = whatif(tls)
            best = min(best, time.process_time() - t0)
        assert res is not None
        in_report = best  # the what-if as a report runs it: the ranks' stall analyses given
        if "ranks" in inspect.signature(whatif).parameters:
            ranks = [analyze_rank(t) for t in tls]
            in_report = float("inf")
            for _ in range(REPEATS):
                t0 = time.process_time()
                whatif(tls, ranks=ranks)
                in_report = min(in_report, time.process_time() - t0)
        print(json.dumps({"name": c["name"], "events": res.n_events, "s": best,
                          "report_s": in_report, "err": res.max_model_error_pct}), flush=True)
    return 0


def _run(python: str, case_file: Path, cwd: Path) -> dict[str, dict[str, float]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # python's own install
    out = subprocess.run([python, str(Path(__file__).resolve()), "--worker", str(case_file)],
                         capture_output=True, text=True, cwd=cwd, env=env, check=False)
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {r["name"]: r for r in rows}


def _keep_best(acc: dict[str, dict[str, float]], rows: dict[str, dict[str, float]]) -> None:
    """Per case, the smaller time of ``acc``'s and ``rows``' (each column on its own)."""
    for name, r in rows.items():
        if name not in acc:
            acc[name] = dict(r)
        else:
            for k in ("s", "report_s"):
                acc[name][k] = min(acc[name][k], r[k])


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return worker(argv[1])
    baseline, rounds = None, ROUNDS
    while argv[:1] in (["--baseline"], ["--rounds"]):
        if argv[0] == "--baseline":
            baseline = Path(argv[1]).resolve()
        else:
            rounds = int(argv[1])
        argv = argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        case_file = Path(tmp) / "cases.json"
        case_file.write_text(json.dumps(cases(Path(tmp), argv)))
        now: dict[str, dict[str, float]] = {}
        before: dict[str, dict[str, float]] = {}
        for _ in range(rounds):  # alternate the checkouts: a load change hits both alike
            _keep_best(now, _run(sys.executable, case_file, ROOT))
            if baseline:
                _keep_best(before, _run(str(baseline / ".venv" / "bin" / "python"),
                                        case_file, baseline))
    head = f"{'case':<32} {'events':>7} {'s':>6} {'us/ev':>6} {'err':>6} {'report s':>8}"
    if baseline:
        head += f" {'base s':>7} {'us/ev':>6} {'x':>5} {'x rep':>6}"
    print(head)
    for name, r in now.items():
        line = (f"{name:<32} {r['events']:>7,} {r['s']:>6.3f} "
                f"{1e6 * r['s'] / r['events']:>6.2f} {r['err']:>5.2f}% {r['report_s']:>8.3f}")
        b = before.get(name)
        if baseline:
            line += (f" {b['s']:>7.3f} {1e6 * b['s'] / b['events']:>6.2f} "
                     f"{b['s'] / r['s']:>4.1f}x {b['report_s'] / r['report_s']:>5.1f}x"
                     if b else f" {'failed':>7}")
        print(line)
    one, tiled = now.get(TILED), now.get(f"{TILED} x{COPIES}")
    if one and tiled:
        line = f"marginal us/event, {TILED} x1 -> x{COPIES}: {_marginal(one, tiled):.2f}"
        b1, bt = before.get(TILED), before.get(f"{TILED} x{COPIES}")
        if baseline:
            line += f", base {_marginal(b1, bt):.2f}" if b1 and bt else ", base failed"
        print(line)
    return 0


def _marginal(one: dict[str, float], tiled: dict[str, float]) -> float:
    """us per event between a run and its tiled copies: what each further event costs."""
    return 1e6 * (tiled["s"] - one["s"]) / (tiled["events"] - one["events"])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
