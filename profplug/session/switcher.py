"""``profplug ab --switch-every N``: flip the sync policy inside one run, at step boundaries.

The launcher sets ``PROFPLUG_SWITCH_EVERY`` (N) and ``PROFPLUG_SWITCH_ORDER`` (the run's
block order of ab labels, e.g. ``event,device``). Step ``i`` (the step source's own count,
from 0) runs the label ``order[(i // N) % len(order)]``: the switch happens when step ``i``
begins, before its body, through :func:`profplug.policy.switch` (the switch that
``profplug.current_policy()`` and ``profplug.p2p`` read). Warm-up steps and the steps after
the timed window alternate too, so their output digests cover every policy. Each switch is
logged (``[step, label]``, the status file's ``policy.switches``): the analyzer assigns
every timed step to its block from that log.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from profplug import policy
from profplug.config import ENV_SWITCH_EVERY, ENV_SWITCH_ORDER, SYNC_POLICIES


class Switcher:
    """A step listener that flips the policy every ``every`` steps, in ``order``."""

    def __init__(self, every: int, order: list[str]) -> None:
        self.every = every
        self.order = order
        self.block = -1  # the index into order of the label in force

    def on_step_begin(self, index: int) -> None:
        b = (index // self.every) % len(self.order)
        if b != self.block:
            self.block = b
            policy.switch(self.order[b], index)


def from_env(environ: Mapping[str, str] | None = None) -> Switcher | None:
    """The switcher the environment asks for (None: no switching); ValueError if malformed."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_SWITCH_EVERY, "").strip()
    if not raw or raw == "0":
        return None
    if not raw.isdigit():
        raise ValueError(f"{ENV_SWITCH_EVERY} must be an integer >= 0, got {raw!r}")
    order = [p.strip() for p in env.get(ENV_SWITCH_ORDER, "").split(",") if p.strip()]
    if len(order) < 2 or any(policy.policy_of(p) not in SYNC_POLICIES for p in order):
        raise ValueError(f"{ENV_SWITCH_ORDER} must name 2 or more policies, got "
                         f"{env.get(ENV_SWITCH_ORDER, '')!r}")
    return Switcher(int(raw), order)


def install() -> Switcher | None:
    """Register the switcher as a step listener (bootstrap, when torch is imported)."""
    import profplug.steps as steps

    sw = from_env()
    if sw is not None:
        policy.switch(sw.order[0], -1)  # before the first step: the first block's policy
        steps.add_listener(on_begin=sw.on_step_begin)
    return sw
