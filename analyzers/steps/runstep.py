"""The run's step: one figure per run, the same in every JSON output and page (docs/costs.md,
"The run's step").

``{statistic, basis, us, per_rank_us}``: ``per_rank_us`` = {rank: that rank's step}, each
rank's ``StepStats.period_us`` (:data:`stats.STATISTIC` over its non-outlier steps of its
GPU period); ``us`` = the largest of them (a pipeline runs at its slowest rank's rate);
``basis`` "step". A run without steps: each rank's GPU window instead, basis "window". No GPU
work at all: ``us`` None. Ranks are JSON keys, so strings. Times in us.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.steps.stats import STATISTIC


class _StepTimes(Protocol):
    @property
    def period_us(self) -> float: ...
    @property
    def n_steps(self) -> int: ...


class RankSteps(Protocol):
    """What the run's step reads of one rank's result (a ``stalls.rank.RankResult``)."""

    @property
    def rank(self) -> int: ...
    @property
    def has_gpu_work(self) -> bool: ...
    @property
    def steps(self) -> _StepTimes | None: ...
    def total(self, key: str) -> float: ...

AB_STATISTIC = "median over rounds"
AB_BASIS = "unprofiled rounds"


def step_object(per_rank: Mapping[int, float], basis: str | None,
                statistic: str = STATISTIC) -> dict[str, Any]:
    """The step object of per-rank figures (us): their largest is the run's."""
    return {"statistic": statistic, "basis": basis,
            "us": round(max(per_rank.values()), 3) if per_rank else None,
            "per_rank_us": {str(k): round(float(v), 3) for k, v in sorted(per_rank.items())}}


def per_rank_steps(ranks: Iterable[RankSteps]) -> tuple[dict[int, float], Basis | None]:
    """({rank: its step}, basis) of a report's ranks: the step where any rank has steps,
    else the GPU window of every rank with GPU work."""
    ranks = [r for r in ranks if r.has_gpu_work]
    steps = {r.rank: float(r.steps.period_us) for r in ranks
             if r.steps is not None and r.steps.n_steps}
    if steps:
        return steps, Basis.STEP
    if ranks:
        return {r.rank: float(r.total("window_us")) for r in ranks}, Basis.WINDOW
    return {}, None


def run_step(ranks: Iterable[RankSteps]) -> dict[str, Any]:
    """The step object of a report's ranks (the module docstring)."""
    per, basis = per_rank_steps(ranks)
    return step_object(per, basis)


def whatif_steps(res: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(step, predicted_step) of a ``WhatIfResult``: its ranks' ``recorded_us`` and
    ``predicted_us``, on the ranks' basis; calibrated on an unprofiled step, basis
    "unprofiled" (``recorded_us`` is then the given step)."""
    ranks = [r for r in res.ranks if r.basis == Basis.STEP] or list(res.ranks)
    basis: str | None = ranks[0].basis if ranks else None  # the JSON's word, or None
    if basis is not None and getattr(res, "calibrated_on_us", None) is not None:
        basis = f"unprofiled {basis}"
    return (step_object({r.rank: r.recorded_us for r in ranks}, basis),
            step_object({r.rank: r.predicted_us for r in ranks}, basis))


def ab_steps(summary: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per policy of an A/B, its step: the median over unprofiled rounds (the pipeline's,
    ``median_step_us``; per rank its ``ranks[].median_step_us``)."""
    out = {}
    for s in summary:
        d = step_object({k.rank: k.median_step_us for k in s.ranks}, AB_BASIS, AB_STATISTIC)
        d["us"] = None if s.median_step_us is None else round(float(s.median_step_us), 3)
        out[s.policy] = d
    return out


def step_words(step: dict[str, Any]) -> str:
    """The step object in words: "3,826.8 us/step (rank 1's median step, the slowest of
    2 ranks)"; "-" without one."""
    us = step.get("us")
    if us is None:
        return "-"
    per = step.get("per_rank_us") or {}
    unit = "us/step" if str(step.get("basis", "")).endswith("step") else "us"
    of = "median step" if unit == "us/step" else "GPU window"
    if len(per) <= 1:
        return f"{us:,.1f} {unit} ({step.get('statistic')})"
    slow = max(per, key=lambda k: per[k])
    return f"{us:,.1f} {unit} (rank {slow}'s {of}, the slowest of {len(per)} ranks)"


def compare_steps_line(step_a: dict[str, Any], step_b: dict[str, Any]) -> str:
    """compare's line of the two runs' steps (their JSON ``a.step`` and ``b.step``)."""
    return f"the run's step: A {step_words(step_a)} vs B {step_words(step_b)}"

