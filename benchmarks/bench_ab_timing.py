"""The observer effect of ``profplug ab``'s step timing, measured interleaved in one process.

    .venv/bin/python benchmarks/bench_ab_timing.py                      # one GPU
    .venv/bin/python benchmarks/bench_ab_timing.py --sync device --rounds 40
    .venv/bin/python benchmarks/bench_ab_timing.py --cpu --hidden 256   # smoke test, no GPU

The loop is ``examples/decode_loop.py``'s single-process decode (``--stages`` local stages of
``--layers`` bf16 GELU(x @ W) layers, the NCCL-like hand-off before each stage, ``--sync``
policy), every step a ``profplug.step()``. Modes, each a listener on the step boundaries
exactly as the rank's session calls the timer:

- ``off``: no timing (the baseline);
- ``host``: the peer, plain host timing: ``time.perf_counter_ns()`` per boundary;
- ``events``: what ``profplug ab`` does: perf counter + a preallocated CUDA event recorded
  on the current stream per boundary (:class:`profplug.session.steptimer.StepTimer`);
- ``events+digest``: also ``profplug.digest`` of the step's output, with digests on as
  ``profplug ab`` has them: the chunk is the timed window, where a call is one step
  comparison (the digests run on the steps outside the window: docs/ab.md).

Every round runs each mode for ``--steps`` steps, in an order shuffled per round (seeded);
a chunk's time is measured on the host between two device synchronizes (one before its
first step, one after its last: no per-step synchronization), so the measurement does not
depend on the timer under test. Per mode: the median over rounds of the chunk's mean step,
its 95% bootstrap CI over rounds, and the overhead vs ``off`` (ab's speedup statistic: ratio
of medians, CI the wider of paired bootstrap and paired t). The host's speed on the GPU VM
drifts by tens of % within a process over seconds, which that ratio of medians still sees;
so the verdict uses the *paired* overhead: the geometric mean over rounds of each round's
``mode / off`` (chunks at most a round apart, ~0.1 s by default: many short rounds), with
Student's t CI on the log ratios. Target: ``events`` paired overhead <= 1% of the step (the
CI's upper end). First, the host cost of one boundary mark, and the bound it implies (one
mark per step: mark cost / step, if every ns of it delayed the GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import decode_loop  # noqa: E402
from profplug.analyzers.ab.stats import (  # noqa: E402
    MIN_ROUNDS,
    median_ci,
    paired_t_interval,
    speedup_ci,
)

import profplug  # noqa: E402
import profplug.steps as steps  # noqa: E402
from profplug import digests  # noqa: E402
from profplug.session import steptimer  # noqa: E402
from profplug.session.steptimer import StepTimer  # noqa: E402

MODES = ("off", "host", "events", "events+digest")
TARGET_PCT = 1.0


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--sync", choices=["device", "event", "none"], default="event")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--steps", type=int, default=50, help="steps per mode per round")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cpu", action="store_true", help="no GPU: a CPU loop (smoke test)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    return ap.parse_args()


class Loop:
    """decode_loop.py's single-process step, on one GPU (or a plain CPU loop)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.cuda = not args.cpu
        if self.cuda and not torch.cuda.is_available():
            raise SystemExit("no CUDA GPU: run with --cpu for a smoke test")
        self.device = torch.device("cuda", 0) if self.cuda else torch.device("cpu")
        dl = decode_loop.parse_args([f"--hidden={args.hidden}", f"--layers={args.layers}",
                                     f"--batch={args.batch}", f"--stages={args.stages}"])
        self.ws = {s: decode_loop.weights(dl, s, self.device) for s in range(args.stages)}
        self.hand_off = decode_loop.LocalHandOff(dl, self.device) if self.cuda else None
        self.policy = args.sync
        g = torch.Generator().manual_seed(dl.seed)
        self.x = torch.randn(args.batch, args.hidden, generator=g).to(self.device,
                                                                      torch.bfloat16)
        self.digest = False

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def run(self, n: int) -> float:
        """n steps; the mean step in us, timed between two synchronizes."""
        x = self.x
        self.sync()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            with profplug.step():
                for s, ws in self.ws.items():
                    x = decode_loop.run_stage(
                        self.hand_off(x, s, self.policy) if self.hand_off else x, ws)
                if self.digest:
                    profplug.digest(x)
        self.sync()
        self.x = x
        return (time.perf_counter_ns() - t0) / n / 1000.0


def with_mode(loop: Loop, mode: str, n: int) -> tuple[float, StepTimer | None]:
    """Run a chunk in ``mode``: the timer's marks hooked on the step boundaries as the
    session does (begin of every step, end of the last)."""
    timer = None if mode == "off" else StepTimer(n, "host" if mode == "host" else "events")
    last = steps.count() + n - 1
    begin: Callable[[int], None] | None = None
    end: Callable[[int], None] | None = None
    if timer is not None:
        mark = timer.mark

        def begin(i: int) -> None:
            mark()

        def end(i: int) -> None:
            if i == last:
                mark()

        steps.add_listener(begin, end)
    loop.digest = mode == "events+digest"
    if loop.digest:  # as under profplug ab: the timed window is not digested
        first = steps.count()
        digests.enable(first + n + digests.AFTER_WINDOW, window=(first, first + n))
    try:
        us = loop.run(n)
    finally:
        if timer is not None:
            steps.remove_listener(begin, end)
        digests.disable()
    return us, timer


# Host ns per mark without CUDA (the Python part): the bound the runtime is held to.
MARK_TARGET_NS = {"host": 2_000, "events": 2_500}


class _NoOpEvent:
    """An event whose record is a C no-op taking the stream (``id``): the Python part of a
    mark without the driver call."""

    record = id


def mark_cost_ns(mode: str, cuda: bool, n: int = 20_000) -> float:
    """Host ns per boundary mark (best of 5). ``events`` without CUDA: the timer's Python
    part with a no-op record and a C call (``abs``) for the raw stream handle."""
    patches = {}
    if mode == "events" and not cuda:
        patches = {"_cuda_in_use": lambda: True, "_device": lambda: 0,
                   "_raw_stream_fn": lambda: abs, "_stream": lambda device: object(),
                   "_new_event": _NoOpEvent}
    best = float("inf")
    with mock.patch.multiple(steptimer, **patches) if patches else contextlib.nullcontext():
        for _ in range(5):
            t = StepTimer(n, mode)
            t0 = time.perf_counter_ns()
            for _ in range(n):
                t.mark()
            best = min(best, (time.perf_counter_ns() - t0) / n)
            if cuda:
                torch.cuda.synchronize()
    return best


def main() -> None:
    args = parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "off" not in modes or any(m not in MODES for m in modes):
        raise SystemExit(f"--modes: choose from {', '.join(MODES)}, including off")
    if args.rounds < MIN_ROUNDS:
        raise SystemExit(f"--rounds: at least {MIN_ROUNDS} (a CI needs them)")
    loop = Loop(args)
    gpu = torch.cuda.get_device_name(0) if loop.cuda else "cpu"
    print(f"bench_ab_timing: {gpu}, torch {torch.__version__}, decode loop hidden "
          f"{args.hidden} x {args.layers} layers x {args.stages} stages, batch {args.batch}, "
          f"sync {args.sync}; {args.rounds} rounds x {args.steps} steps per mode")
    marks = {m: mark_cost_ns(m, loop.cuda) for m in ("host", "events")}
    what = ("raw current-stream handle + C-level cudaEventRecord" if loop.cuda else
            "raw current-stream handle + a no-op record: the Python part, no driver call")
    print(f"host cost of one boundary mark: host {marks['host']:.0f} ns, events "
          f"{marks['events']:.0f} ns ({what})")
    if not loop.cuda:  # the targets of the Python part (once a unit test: a wall-clock bound)
        for mode, bound in MARK_TARGET_NS.items():
            verdict = "PASS" if marks[mode] < bound else "FAIL"
            print(f"  {mode} mark < {bound:,} ns: {verdict} ({marks[mode]:.0f} ns)")
    with torch.inference_mode():
        loop.run(args.warmup)
        rng = random.Random(args.seed)
        chunks: dict[str, list[float]] = {m: [] for m in modes}
        timed: dict[str, list[float]] = {m: [] for m in modes if m != "off"}
        for _ in range(args.rounds):
            order = list(modes)
            rng.shuffle(order)
            for m in order:
                us, timer = with_mode(loop, m, args.steps)
                chunks[m].append(us)
                if timer is not None:
                    res = timer.result()
                    timed[m].append(sorted(res["step_us"])[len(res["step_us"]) // 2])
    base = chunks["off"]
    rows = []
    print(f"\n{'mode':<14} {'median us/step':>14} {'95% CI':>19} {'overhead':>9} "
          f"{'95% CI':>17} {'paired':>8} {'95% CI':>17} {'timer says':>11}")
    for m in modes:
        med, lo, hi = median_ci(chunks[m])
        assert lo is not None and hi is not None  # --rounds >= MIN_ROUNDS
        row = {"mode": m, "median_step_us": med, "ci95_us": [lo, hi]}
        line = f"{m:<14} {med:>14,.1f} {f'{lo:,.1f}-{hi:,.1f}':>19}"
        if m != "off":
            r, rlo, rhi, _ = speedup_ci(chunks[m], base)  # median(mode) / median(off)
            assert rlo is not None and rhi is not None
            pct, plo, phi = (r - 1) * 100, (rlo - 1) * 100, (rhi - 1) * 100
            says = sorted(timed[m])[len(timed[m]) // 2]
            ratios = np.log(np.asarray(chunks[m]) / np.asarray(base))
            ppct = (math.exp(float(ratios.mean())) - 1) * 100
            tlo, thi = paired_t_interval(np.asarray(chunks[m]), np.asarray(base))
            pplo, pphi = (tlo - 1) * 100, (thi - 1) * 100
            row |= {"overhead_pct": pct, "overhead_ci95_pct": [plo, phi],
                    "paired_overhead_pct": ppct, "paired_overhead_ci95_pct": [pplo, pphi],
                    "timer_median_step_us": says}
            line += (f" {pct:>+8.2f}% {f'{plo:+.2f}..{phi:+.2f}%':>17} {ppct:>+7.2f}% "
                     f"{f'{pplo:+.2f}..{pphi:+.2f}%':>17} {says:>11,.1f}")
        rows.append(row)
        print(line)
    print("(chunk mean step between two synchronizes; median and 95% bootstrap CI over "
          "rounds;\n overhead: ratio of medians vs off, CI paired by round; paired: geometric "
          "mean of the\n per-round ratios, t CI; timer says: median of the timer's own per-step "
          "times)")
    ev = next((r for r in rows if r["mode"] == "events"), None)
    if ev is not None:
        lo, hi = ev["paired_overhead_ci95_pct"]
        ok = hi <= TARGET_PCT
        bound = marks["events"] / 1000.0 / float(np.median(base)) * 100
        print(f"\nevents timing overhead (paired): {ev['paired_overhead_pct']:+.2f}% (95% CI "
              f"{lo:+.2f}..{hi:+.2f}%): {'within' if ok else 'NOT shown within'} the "
              f"{TARGET_PCT:g}% target; host-cost bound {bound:.2f}% (one "
              f"{marks['events'] / 1000.0:.2f} us mark per {float(np.median(base)):.0f} us step)")
    if args.json is not None:
        args.json.write_text(json.dumps({"gpu": gpu, "args": {k: str(v) for k, v in
                                                               vars(args).items()},
                                         "mark_ns": marks, "modes": rows,
                                         "chunks_us": chunks}, indent=1))


if __name__ == "__main__":
    main()
