"""The false-positive rate of ``profplug ab``'s verdict on synthetic A/A experiments.

An A/A experiment runs the same policy under two labels (``--policies device,device``), so
any resolved difference is a false positive. Each synthetic experiment draws, per process
(run), a host speed uniform in 0.6-1.4x (the VM draws one per process); the first run of
every round is ``--position`` slower (a position effect: cold page cache, the previous run's
teardown); inside a switched run the first block is that much slower instead; every step
gets log-normal noise (``--noise``) and the run a linear drift of up to ``--drift`` from
its first to its last step. The records go through the real analysis
(``analyzers.ab.analyze_ab``), and the experiment counts as a false positive when the
speedup CI excludes 1. The rate comes with its binomial 95% CI (Wilson).

    .venv/bin/python benchmarks/sim_ab_aa.py                 # 400 experiments per design
    .venv/bin/python benchmarks/sim_ab_aa.py --experiments 1000 --rounds 5
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
from profplug.analyzers.ab import analyze_ab, schedule
from profplug.analyzers.ab.plan import positions, switched_orders

LABELS = ["device", "device2"]
DESIGNS = ("interleaved", "counterbalanced", "switched")


def _steps(rng: np.random.Generator, n: int, base_us: float, noise: float, drift: float
           ) -> np.ndarray:
    slope = rng.uniform(-drift, drift)
    return base_us * (1.0 + slope * np.linspace(0.0, 1.0, n)) * rng.lognormal(0.0, noise, n)


def experiment(design: str, rng: np.random.Generator, rounds: int, steps: int,
               every: int, position: float, noise: float, drift: float
               ) -> list[dict[str, Any]]:
    """The run records of one synthetic A/A experiment."""
    runs: list[dict[str, Any]] = []
    skip = 2 * every
    if design == "switched":
        for r, order in enumerate(switched_orders(LABELS, rounds)):
            t = _steps(rng, steps, 1000.0 * rng.uniform(0.6, 1.4), noise, drift)
            t[:every] *= 1.0 + position  # the run's first block (the window's first)
            runs.append({"index": r, "round": r, "policy": "+".join(order), "status": "ok",
                         "position": 0, "block_order": order, "switch_every": every,
                         "ranks": [{"rank": 0, "first_step": skip, "clock": "host",
                                    "step_us": t.round(3).tolist()}]})
        return runs
    plan = schedule(LABELS, rounds, design)
    for k, ((rnd, label), pos) in enumerate(zip(plan, positions(plan), strict=True)):
        t = _steps(rng, steps, 1000.0 * rng.uniform(0.6, 1.4) * (
            1.0 + position if pos == 0 else 1.0), noise, drift)
        runs.append({"index": k, "round": rnd, "policy": label, "status": "ok",
                     "position": pos, "ranks": [{"rank": 0, "first_step": skip,
                                                 "clock": "host",
                                                 "step_us": t.round(3).tolist()}]})
    return runs


def false_positive_rate(design: str, experiments: int = 400, rounds: int = 5,
                        steps: int = 100, every: int = 10, position: float = 0.3,
                        noise: float = 0.03, drift: float = 0.05, seed: int = 0,
                        resamples: int = 2000) -> tuple[int, int]:
    """(false positives, experiments) of ``design`` at 95%."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(experiments):
        runs = experiment(design, rng, rounds, steps, every, position, noise, drift)
        res = analyze_ab(runs, policies=LABELS, rounds=rounds, order=design,
                         resamples=resamples)
        hits += bool(res.policy("device2").resolved)
    return hits, experiments


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson 95% interval of a rate k/n."""
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5, help="rounds (switched: runs)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--every", type=int, default=10, help="switched: steps per block")
    ap.add_argument("--position", type=float, default=0.3)
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--drift", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--designs", default=",".join(DESIGNS))
    args = ap.parse_args(argv)
    print(f"A/A experiments: host speed U(0.6, 1.4) per process, position effect "
          f"+{args.position:.0%}, step noise {args.noise:.0%}, drift up to {args.drift:.0%}, "
          f"{args.rounds} rounds/runs, {args.steps} steps, seed {args.seed}")
    print(f"{'design':<16} {'experiments':>11} {'false pos.':>10} {'rate':>7} {'95% CI':>14}")
    for design in args.designs.split(","):
        k, n = false_positive_rate(design, args.experiments, args.rounds, args.steps,
                                   args.every, args.position, args.noise, args.drift,
                                   args.seed)
        lo, hi = wilson(k, n)
        print(f"{design:<16} {n:>11} {k:>10} {k / n:>7.1%} {f'{lo:.1%}-{hi:.1%}':>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
