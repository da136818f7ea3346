"""The statistics of a switched A/B (``profplug ab --switch-every N``): each run alternates
the policies in blocks of N steps, so every run compares them at its own host speed.

- A step's label: step ``i`` (the job's step count, from 0) runs
  ``block_order[(i // N) % len(block_order)]`` (``profplug.session.switcher``).
- The first ``discard`` steps of every block (:data:`DISCARD_AFTER_SWITCH`, 2) are left
  out: a switch from device to event leaves the GPU queue drained (the next steps refill
  it, so the first event step is a device-like step), and the first event wait after a
  switch meets a cold event pool; from event to device the first synchronize drains the
  queue the event steps built up. Both distort the block's first step or two; the
  ``after_switch`` profile (each offset's step over its block's robust step, median over
  blocks) shows how many steps that takes on the job at hand.
- Per run and label: the robust step time over its blocks (``steps.stats.center`` of the
  pipeline's steps that are kept); per run the ratio baseline / label.
- Across runs: Student's t on the runs' log ratios, ``exp(mean +- t(n-1) sd / sqrt(n))``.
  Why t: each run is one independent draw of the host speed (the VM draws it per process),
  and the within-run ratio cancels it, leaving one roughly normal log ratio per run; with 3
  to 10 runs a bootstrap over runs is too narrow (its spread is at most what it was given).
  A mixed model with the run as a random effect on the log step times gives the same
  interval when each run contributes balanced blocks of both labels: the run's effect
  cancels in the within-run contrast, and what is left is the t interval over runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from profplug.analyzers.ab import stats
from profplug.analyzers.steps.stats import center

DISCARD_AFTER_SWITCH = 2


def is_switched(run: dict[str, Any]) -> bool:
    return bool(run.get("block_order")) and bool(run.get("switch_every"))


def _first_step(run: dict[str, Any]) -> int | None:
    firsts = [k.get("first_step") for k in run.get("ranks", []) if k.get("step_us")]
    firsts = [int(f) for f in firsts if f is not None]
    return min(firsts) if firsts else None


def labelled_steps(run: dict[str, Any]) -> list[tuple[int, str, float]]:
    """``(offset in block, label, pipeline step us)`` for every timed step of a switched
    run (empty when it has no steps)."""
    steps = stats.pipeline_steps([k.get("step_us") or [] for k in sorted(
        run.get("ranks", []), key=lambda k: int(k["rank"]))])
    first = _first_step(run)
    if first is None or not steps.size:
        return []
    every, order = int(run["switch_every"]), list(run["block_order"])
    out = []
    for k, t in enumerate(steps.tolist()):
        i = first + k
        out.append((i % every, order[(i // every) % len(order)], float(t)))
    return out


def kept_steps(run: dict[str, Any], discard: int = DISCARD_AFTER_SWITCH
               ) -> dict[str, list[float]]:
    """Per label, the pipeline step times of its blocks, less each block's first
    ``discard`` steps."""
    by_label: dict[str, list[float]] = {}
    for off, label, t in labelled_steps(run):
        if off >= discard:
            by_label.setdefault(label, []).append(t)
    return by_label


def run_centers(run: dict[str, Any], discard: int = DISCARD_AFTER_SWITCH
                ) -> dict[str, tuple[float, int]]:
    """Per label: (robust step us over its kept steps, steps kept)."""
    return {lb: (center(v), len(v))
            for lb, v in kept_steps(run, discard).items() if v}


def after_switch(runs: Sequence[dict[str, Any]], discard: int = DISCARD_AFTER_SWITCH
                 ) -> dict[str, list[float | None]]:
    """Per label, per offset in a block: the median over blocks of the step time divided
    by its block's robust step (over the block's kept steps): the switch's transient."""
    ratios: dict[str, dict[int, list[float]]] = {}
    for run in runs:
        block: list[tuple[int, str, float]] = []
        steps = labelled_steps(run)
        for j, item in enumerate(steps):
            block.append(item)
            end = j + 1 == len(steps) or steps[j + 1][0] == 0
            if not end:
                continue
            kept = [t for off, _, t in block if off >= discard]
            if block[0][0] == 0 and kept:  # a whole block from its switch on
                c = center(kept)
                for off, label, t in block:
                    ratios.setdefault(label, {}).setdefault(off, []).append(t / c)
            block = []
    out: dict[str, list[float | None]] = {}
    for label, by_off in ratios.items():
        n = max(by_off) + 1
        out[label] = [round(float(np.median(by_off[o])), 4) if o in by_off else None
                      for o in range(n)]
    return out


def log_ratio_ci(ratios: Sequence[float], level: float = stats.LEVEL
                 ) -> tuple[float, float | None, float | None, int]:
    """(exp(mean log ratio), lo, hi, runs): Student's t over the runs' log ratios; no CI
    (None) with fewer than ``stats.MIN_ROUNDS`` runs."""
    r = np.log(np.asarray([x for x in ratios if x and x > 0], dtype=float))
    if not r.size:
        raise ValueError("no ratio")
    m = float(r.mean())
    if r.size < stats.MIN_ROUNDS:
        return math.exp(m), None, None, int(r.size)
    half = stats.t_quantile(r.size - 1, level) * float(np.std(r, ddof=1)) / math.sqrt(r.size)
    return math.exp(m), math.exp(m - half), math.exp(m + half), int(r.size)
