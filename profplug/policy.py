"""The sync policy in force in this process, the switch ``profplug ab`` flips, and what each
policy reached (stdlib only: imported inside every rank).

- :func:`current_policy` returns the policy in force (``"device"``, ``"event"`` or
  ``"none"``). ``profplug.p2p`` reads the same switch when called without ``sync=``, so a
  custom pipeline can follow it (``if profplug.current_policy() == "device":
  torch.cuda.synchronize()``). It starts as ``PROFPLUG_SYNC`` (unset: ``device``);
  ``profplug ab --switch-every N`` flips it at step boundaries (:func:`switch`,
  ``profplug.session.switcher``).
- Per policy, this rank counts what the policy touched: ``p2p_calls`` (send/recv through
  ``profplug.p2p``, and calls of every sync site: Megatron's, transformers', declared ones;
  ``profplug.sites``), ``device_syncs`` and ``event_waits`` issued by them (CUDA only), and ``current_policy_calls``. A counter
  is one list item increment; the counts go into the rank's status file (``policy``), and
  ``profplug ab`` says loudly when a policy reached nothing in a run.
"""

from __future__ import annotations

from typing import Any

from profplug.analyzers.core.vocabulary import SyncPolicy
from profplug.config import SYNC_POLICIES, sync_policy

P2P, DEVICE_SYNC, EVENT_WAIT, ASKED = 0, 1, 2, 3
KINDS = ("p2p_calls", "device_syncs", "event_waits", "current_policy_calls")

_current: SyncPolicy | None = None
_label: str | None = None  # the ab label of the policy in force (A/A: device, device2)
# policy -> one counter per KINDS; mutated in place (profplug.p2p holds a reference)
COUNTS: dict[SyncPolicy, list[int]] = {p: [0] * len(KINDS) for p in SYNC_POLICIES}
_switches: list[list[Any]] = []  # [step, label] per switch made by switch()


def get() -> SyncPolicy:
    """The policy in force (not counted): the last one set, else ``PROFPLUG_SYNC``."""
    global _current
    if _current is None:
        _current = sync_policy(None)
    return _current


def current_policy() -> SyncPolicy:
    """The sync policy in force: ``"device"``, ``"event"`` or ``"none"``. A call counts as
    the policy reaching the job (``profplug ab`` checks that every policy reached it)."""
    p = _current if _current is not None else get()
    COUNTS[p][ASKED] += 1
    return p


def set_policy(policy: str | None) -> None:
    """Set the policy in force (``None``: re-read ``PROFPLUG_SYNC``)."""
    global _current
    _current = None if policy is None else sync_policy(policy)


def switch(label: str, step: int) -> None:
    """Flip the policy at a step boundary to ``label``'s policy (``device2`` -> device: an
    A/A's second label) and log it."""
    global _label
    set_policy(policy_of(label))
    _label = label
    _switches.append([step, label])


def policy_of(label: str) -> str:
    """The sync policy of an ab label: ``device2`` (an A/A's second label) -> ``device``."""
    return label.rstrip("0123456789")


def counts() -> dict[str, dict[str, int]]:
    """Per policy, per kind, the calls counted so far in this rank."""
    return {p: dict(zip(KINDS, c, strict=True)) for p, c in COUNTS.items()}


def status() -> dict[str, Any]:
    """The rank status file's ``policy`` object: counts, switches, the policy in force."""
    return {"counts": counts(), "switches": [list(s) for s in _switches],
            "current": _current, "label": _label}


def reset() -> None:
    """Back to a fresh process's state (tests)."""
    global _current, _label
    _current, _label = None, None
    for c in COUNTS.values():
        c[:] = [0] * len(KINDS)
    _switches.clear()
