"""The finding of a run in one sentence, and the run-level warnings of a report.

``headline(ranks, said)`` says what device-wide synchronizes cost per step (or per GPU
window without steps), on the rank where they cost the most:

- with an analysis that has its say (``AnalysisSpec.headline``: the what-if's,
  ``whatif.finding``), its sentence;
- without: the direct cost, and how to get the rest (``profplug whatif``);
- with no device-wide synchronize (or no saving): what the GPU's idle time is mostly.

The words of the figures are ``stalls.phrases``'.
"""

from __future__ import annotations

from collections.abc import Sequence

from profplug.analyzers.core.analysis_spec import HeadlineFn
from profplug.analyzers.stalls.phrases import (
    ASK_WHATIF,
    device_calls,
    dominant_idle,
    pct_text,
    per_step,
    share_pct,
    top_device_site,
    us_text,
)
from profplug.analyzers.stalls.rank import RankResult
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule


def headline(ranks: list[RankResult],
             said: Sequence[tuple[HeadlineFn, object]] = ()) -> str:
    """The run's finding in one sentence (see the module docstring)."""
    gpu = [r for r in ranks if r.has_gpu_work]
    if not gpu:
        return "No GPU work in these traces (no kernels, memcpys or memsets): nothing to attribute."
    if not any(device_calls(r) for r in gpu):
        return f"No device-wide synchronizes on any rank; {dominant_idle(gpu)}."
    for fn, result in said:  # an analysis's say (``AnalysisSpec.headline``), first wins
        line = fn(gpu, result)
        if line is not None:
            return line
    r = max(gpu, key=lambda x: per_step(x)[1].get("device_sync", 0.0))
    whole, idle, per = per_step(r)
    direct = idle.get("device_sync", 0.0)
    site = top_device_site(r)
    at = f" at {site}" if site else ""
    return (f"Device-wide synchronizes cost rank {r.rank} {us_text(direct)}"
            f"{'/step' if per == 'step' else ''} directly ({pct_text(share_pct(direct, whole))} "
            f"of its {per}){at}; {ASK_WHATIF}.")


def no_steps_warning(ranks: list[RankResult], rule: StepRule = DEFAULT_STEPS) -> str | None:
    """One line when ranks with GPU work have no steps, with the ways to mark them."""
    missing = [r.rank for r in ranks if r.has_gpu_work and r.steps is None]
    if not missing:
        return None
    who = ("any rank" if len(missing) == sum(r.has_gpu_work for r in ranks)
           else "rank(s) " + ", ".join(map(str, missing)))
    return (f"no steps found on {who} (looked for {rule.describe()}), so times are per GPU "
            "window: name the range that marks a step with --step-range NAME or re:REGEX, "
            "mark steps at capture with `profplug run --step-fn MODULE:FUNCTION`, or wrap "
            "each step in `with profplug.step():`")
