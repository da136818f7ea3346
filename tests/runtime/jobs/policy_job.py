"""A sleep-based job with a known truth for ``profplug ab`` tests (one process, CPU).

    python policy_job.py --steps 80 [--base-ms 4] [--event-factor 0.9] [--host-seed S]
        [--first-slow 1.3] [--no-reach]

Every step is a ``profplug.step()`` of ``--base-ms`` x the host speed, times
``--event-factor`` when ``profplug.current_policy()`` (read every step) says ``event``:
the event policy's step is exactly that fraction of the device step. Steps are paced
against absolute deadlines (sleep, then spin the last 1.5 ms), so the period from one step's
begin to the next is the target itself: the fixed cost around a step (profplug's boundary,
the loop) falls on both boundaries alike and cancels. A step that overran its deadline
(a busy host) is not caught up on: the next step starts a new schedule.

- ``--host-seed S``: the host speed of this process is drawn uniformly in 0.6-1.4 from
  ``random.Random(S * 1000 + PROFPLUG_AB_RUN)`` (a new, reproducible draw per run, as the
  VM draws one per process); without it the speed is 1.
- ``--first-slow F``: the first run of every round (``PROFPLUG_AB_POSITION`` 0) is F times
  slower: a planted position effect.
- ``--no-reach``: never asks for the policy (a job the policy cannot reach).
- ``--ask-once``: asks for the policy once, before the first step (a job that cannot be
  switched inside a run).
Each step's output (its index and nothing policy-dependent) goes to ``profplug.digest``.
"""

from __future__ import annotations

import argparse
import os
import random
import time

import torch

import profplug

SPIN_S = 1.5e-3  # the last part of a step is spun, not slept: a sleep wakes up late


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--base-ms", type=float, default=4.0)
    ap.add_argument("--event-factor", type=float, default=1.0)
    ap.add_argument("--host-seed", type=int, default=-1)
    ap.add_argument("--first-slow", type=float, default=1.0)
    ap.add_argument("--no-reach", action="store_true")
    ap.add_argument("--ask-once", action="store_true")
    args = ap.parse_args()
    speed = 1.0
    if args.host_seed >= 0:
        run = int(os.environ.get("PROFPLUG_AB_RUN", "0"))
        speed = random.Random(args.host_seed * 1000 + run).uniform(0.6, 1.4)
    if os.environ.get("PROFPLUG_AB_POSITION") == "0":
        speed *= args.first_slow
    out = torch.zeros(4)
    once = profplug.current_policy() if args.ask_once else None
    deadline = time.perf_counter()
    for i in range(args.steps):
        with profplug.step():
            factor = 1.0
            policy = once or (None if args.no_reach else profplug.current_policy())
            if policy == "event":
                factor = args.event_factor
            out.fill_(float(i))
            profplug.digest(out)
            now = time.perf_counter()
            if now > deadline + 2e-4:  # fell behind (the host was busy): do not catch up
                deadline = now
            deadline += args.base_ms * 1e-3 * speed * factor
            left = deadline - time.perf_counter()
            if left > SPIN_S:
                time.sleep(left - SPIN_S)
            while time.perf_counter() < deadline:
                pass
    print(f"policy_job: host speed {speed:.3f}", flush=True)


if __name__ == "__main__":
    main()
