"""A what-if prediction set against an A/B's measurements (``profplug ab --whatif RUN``).

RUN is a traced run of the job with the device policy (``profplug run --sync device``).
The what-if replays it without its device-wide synchronizes; its per-step prediction for the
pipeline (the slowest rank) is compared with the unprofiled ``event`` runs of the A/B (else
``none``): is the prediction inside their 95% CI, and how far from their median. Since the
profiler itself slows the traced run, the predicted *speedup* (recorded / predicted) is
compared with the measured speedup too, and the traced step with the unprofiled device runs
(the profiler's own cost).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .result import AbResult

MEASURED = ("event", "none")  # the policies a prediction without device syncs stands for


def whatif_overlay(paths: Sequence[Path], run: str) -> dict[str, Any]:
    """Run the what-if on the traces under ``paths`` (the run named ``run``)."""
    from ..whatif import whatif_paths

    return overlay(whatif_paths(paths), run)


def overlay(res: Any, run: str) -> dict[str, Any]:
    """The pipeline's recorded and predicted step (us) of a ``WhatIfResult``."""
    ranks = [r for r in res.ranks if r.basis == "step"] or list(res.ranks)
    recorded = max((r.recorded_us for r in ranks), default=0.0)
    predicted = max((r.predicted_us for r in ranks), default=0.0)
    return {
        "run": run,
        "drop": res.drop,
        "basis": ranks[0].basis if ranks else None,
        "recorded_step_us": round(recorded, 3),
        "predicted_step_us": round(predicted, 3),
        "predicted_speedup": round(recorded / predicted, 4) if predicted > 0 else None,
        "max_model_error_pct": round(res.max_model_error_pct, 2),
        "ranks": [{"rank": r.rank, "recorded_us": round(r.recorded_us, 3),
                   "predicted_us": round(r.predicted_us, 3)} for r in res.ranks],
        "warnings": list(res.warnings),
    }


def attach(result: AbResult, ov: dict[str, Any]) -> None:
    """Compare the prediction with the measured runs and keep it in ``result.whatif``."""
    ov = dict(ov)
    policy = next((p for p in MEASURED if p in result.policies), None)
    measured = result.policy(policy) if policy else None
    device = result.policy("device")
    ov["measured_policy"] = policy
    if measured is not None and measured.median_step_us is not None:
        med, (lo, hi) = measured.median_step_us, measured.ci95_us or [None, None]
        pred = ov["predicted_step_us"]
        ov["measured_median_step_us"] = med
        ov["measured_ci95_us"] = [lo, hi]
        ov["prediction_in_ci"] = bool(lo is not None and lo <= pred <= hi)
        ov["prediction_error_pct"] = round((pred - med) / med * 100.0, 2)
        ov["measured_speedup"] = measured.speedup_vs_device
        ov["measured_speedup_ci95"] = measured.speedup_ci95
        sp, ci = ov["predicted_speedup"], measured.speedup_ci95
        ov["predicted_speedup_in_ci"] = bool(sp is not None and ci and ci[0] <= sp <= ci[1])
    if device.median_step_us:
        ov["profiler_overhead_pct"] = round(
            (ov["recorded_step_us"] - device.median_step_us) / device.median_step_us * 100, 1)
    result.whatif = ov


def line(ov: dict[str, Any]) -> str:
    """One sentence: the prediction against the measurement."""
    head = (f"what-if ({ov['run']}, traced device run): predicted "
            f"{ov['predicted_step_us']:,.1f} us/step without device syncs")
    if ov.get("measured_median_step_us") is None:
        return head + " (no measured event/none runs to compare)"
    lo, hi = ov["measured_ci95_us"]
    inside = "inside" if ov["prediction_in_ci"] else "outside"
    out = (f"{head}; measured {ov['measured_policy']} {ov['measured_median_step_us']:,.1f} "
           f"(95% CI {lo:,.1f}-{hi:,.1f}): {inside} the CI, {ov['prediction_error_pct']:+.1f}%")
    if ov.get("predicted_speedup") and ov.get("measured_speedup"):
        out += (f"; speedup predicted {ov['predicted_speedup']:.2f}x, measured "
                f"{ov['measured_speedup']:.2f}x")
    if ov.get("profiler_overhead_pct") is not None:
        out += f"; the traced device step is {ov['profiler_overhead_pct']:+.1f}% vs unprofiled"
    return out
