"""Did each policy reach the job? Every rank counts, per sync policy, what the policy
touched (``profplug.policy``: calls of sync sites (``profplug.sites``), device syncs and
event waits they issued, ``profplug.current_policy()`` calls); a run record keeps them per rank
(``ranks[].policy_counts``). A policy that reached nothing in a run could not have changed
anything in it: ``ab`` says so in one loud line and exits with ``EXIT_NOT_REACHED``.
Records without counts (an ``ab.json`` from before the check) are not checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from profplug.analyzers.ab.plan import policy_of

LOOKED_FOR = ("no sync site called (profplug.p2p, Megatron-Core's, transformers' or a "
              "--sync-site), no device sync or event wait issued, no "
              "profplug.current_policy() call")


def run_labels(run: dict[str, Any]) -> list[str]:
    """The labels a run ran: its policy; switched, the labels the switch put in force
    (``ranks[].switches``: a job that ended within the first block ran only one), else its
    block order."""
    order = run.get("block_order")
    if not order:
        return [run["policy"]]
    seen = {s[1] for k in run.get("ranks", []) for s in k.get("switches") or []
            if isinstance(s, list) and len(s) == 2}
    return [lb for lb in order if lb in seen] if seen else list(order)


def reached(run: dict[str, Any]) -> dict[str, bool] | None:
    """Per label of the run: whether its policy reached the job on any rank (None: the run
    recorded no counts)."""
    counts = [k.get("policy_counts") for k in run.get("ranks", [])]
    counts = [c for c in counts if isinstance(c, dict)]
    if not counts:
        return None
    return {lb: any(sum(int(v or 0) for v in (c.get(policy_of(lb)) or {}).values()) > 0
                    for c in counts) for lb in run_labels(run)}


def not_reached(runs: Sequence[dict[str, Any]]) -> list[str]:
    """One line per (successful run, label) whose policy reached nothing."""
    out = []
    for r in runs:
        if r.get("status") != "ok":
            continue
        for label, ok in (reached(r) or {}).items():
            if not ok:
                out.append(f"POLICY NOT REACHED: run {r['index']} (round {r['round']}, "
                           f"{label}): the {policy_of(label)} policy reached nothing in the "
                           f"job: {LOOKED_FOR}")
    return out


def reached_some_not_all(run: dict[str, Any]) -> bool:
    """A switched run in which some labels' policies reached the job and others did not:
    the job follows the policy it starts with, not the switch."""
    got = reached(run)
    return got is not None and any(got.values()) and not all(got.values())
