"""The order in which ``profplug ab`` runs the job: rounds x policies, interleaved.

``interleaved``: every round runs the policies in the order given (ABAB...); ``random``: every
round runs them in an order shuffled with ``random.Random(seed)`` (the seed is recorded in
``ab.json``, so the order can be reproduced). Either way each round holds one run of every
policy, close together in time, which is what lets the statistics pair them by round.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

ORDERS = ("interleaved", "random")
BASELINE = "device"


def parse_policies(text: str, choices: Sequence[str]) -> list[str]:
    """``"device,event,none"`` -> the list; ValueError unless it names ``device`` and at
    least one other policy, each once, all from ``choices``."""
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in choices]
    if bad:
        raise ValueError(f"unknown policy {bad[0]!r} (choose from {', '.join(choices)})")
    if len(set(names)) != len(names):
        raise ValueError(f"a policy is named twice in {text!r}")
    if BASELINE not in names or len(names) < 2:
        raise ValueError(f"name {BASELINE!r} (the baseline) and at least one other policy, "
                         f"e.g. device,event")
    return names


def schedule(policies: Sequence[str], rounds: int, order: str = "interleaved",
             seed: int | None = None) -> list[tuple[int, str]]:
    """``(round, policy)`` for every run, in execution order."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    rng = random.Random(seed)
    plan: list[tuple[int, str]] = []
    for r in range(rounds):
        this = list(policies)
        if order == "random":
            rng.shuffle(this)
        plan += [(r, p) for p in this]
    return plan
