"""The order in which ``profplug ab`` runs the job, and the labels of its policies.

Separate runs (``schedule``): rounds x labels, each round one run of every label.

- ``counterbalanced`` (default): round ``r`` runs the labels rotated by ``r`` (a cyclic
  Latin square: two labels alternate AB / BA, three run ABC / BCA / CAB), so every label
  takes every position in a round equally often over each ``len(labels)`` rounds. A
  position effect (the first run of a round slower: cold page cache, clocks, the previous
  run's teardown) then falls on every label alike instead of on the first one named.
- ``random``: every round in an order shuffled with ``random.Random(seed)`` (the seed is
  recorded in ``ab.json``, so the order can be reproduced).
- ``interleaved``: every round in the order given (ABAB...; the order of older A/Bs, kept
  to repeat them: any position effect becomes a policy effect).

Switched runs (``switched_orders``): each run alternates the labels in blocks of steps; run
``r``'s block order is the labels rotated by ``r`` (the same Latin square).

Labels: a policy named twice (``device,device``, an A/A check) gets the labels ``device``
and ``device2``; :func:`policy_of` maps a label back to its sync policy.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from profplug.analyzers.core.vocabulary import SyncPolicy

ORDERS = ("counterbalanced", "random", "interleaved")
DEFAULT_ORDER = "counterbalanced"
BASELINE = SyncPolicy.DEVICE


def policy_of(label: str) -> str:
    """The sync policy of a label: ``device2`` (an A/A's second label) -> ``device``."""
    return label.rstrip("0123456789")


def parse_policies(text: str, choices: Sequence[str]) -> list[str]:
    """``"device,event,none"`` -> the labels; ValueError unless it names ``device`` and at
    least one other policy, each once, all from ``choices``; or ``device,device`` (an A/A
    check: the labels ``device``, ``device2``)."""
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in choices]
    if bad:
        raise ValueError(f"unknown policy {bad[0]!r} (choose from {', '.join(choices)})")
    if names == [BASELINE, BASELINE]:
        return [BASELINE, f"{BASELINE}2"]
    if len(set(names)) != len(names):
        raise ValueError(f"a policy is named twice in {text!r} (an A/A check is "
                         f"{BASELINE},{BASELINE})")
    if BASELINE not in names or len(names) < 2:
        raise ValueError(f"name {BASELINE!r} (the baseline) and at least one other policy, "
                         f"e.g. device,event")
    return names


def _rotated(labels: Sequence[str], k: int) -> list[str]:
    k %= len(labels)
    return [*labels[k:], *labels[:k]]


def schedule(policies: Sequence[str], rounds: int, order: str = DEFAULT_ORDER,
             seed: int | None = None) -> list[tuple[int, str]]:
    """``(round, label)`` for every run, in execution order."""
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
        elif order == "counterbalanced":
            this = _rotated(this, r)
        plan += [(r, p) for p in this]
    return plan


def positions(plan: Sequence[tuple[int, str]]) -> list[int]:
    """Each run's position within its round (0: the round's first run)."""
    seen: dict[int, int] = {}
    out = []
    for rnd, _ in plan:
        out.append(seen.get(rnd, 0))
        seen[rnd] = out[-1] + 1
    return out


def switched_orders(policies: Sequence[str], runs: int) -> list[list[str]]:
    """The block order of each switched run: the labels rotated by the run's index."""
    if runs < 1:
        raise ValueError("runs must be >= 1")
    return [_rotated(policies, r) for r in range(runs)]
