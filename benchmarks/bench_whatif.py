"""Speed of the what-if replay: events vs seconds for 1x, 2x, 4x replicated traces.

    .venv/bin/python benchmarks/bench_whatif.py                 # synthetic 30-step PP=2 run
    .venv/bin/python benchmarks/bench_whatif.py RUN_DIR_OR_FILES  # a real run (all ranks)

A replica is the run's timelines repeated back to back in time (correlation ids offset), so
the model sees k times the events with the same structure. Seconds = model build + both
replays + the per-rank comparison (``whatif``), excluding trace parsing.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from profplug.analyzers.load import load_timelines
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


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        paths = argv or synthetic_run(Path(tmp))
        base = load_timelines(paths, jobs=1, progress=False)
    print(f"{'copies':>6} {'events':>9} {'seconds':>8} {'us/event':>9}  max model error")
    for k in (1, 2, 4):
        tls = [replicate(t, k) for t in base]
        t0 = time.perf_counter()
        res = whatif(tls)
        dt = time.perf_counter() - t0
        print(f"{k:>6} {res.n_events:>9,} {dt:>8.3f} {1e6 * dt / res.n_events:>9.2f}  "
              f"{res.max_model_error_pct:.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
