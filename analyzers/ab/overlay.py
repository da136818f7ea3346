"""A what-if prediction set against an A/B's measurements (``profplug ab --whatif RUN``).

RUN is a traced run of the job with the device policy (``profplug run --sync device``).
The what-if replays it without its device-wide synchronizes. Under the profiler the host is
slower, so the prediction is made at the host speed of the A/B's own unprofiled device runs
(``whatif_unprofiled``, calibrated on their median step): that is the number set against
the unprofiled ``event`` runs (else ``none``): inside their 95% CI or not, the prediction's
error band against that CI, and its distance from their median. The prediction at the traced
host speed is kept too (``traced``), as is the profiler's own cost (the traced device step
against the unprofiled one). The pipeline's step is the slowest rank's. Every step here is
the report's: the median over the non-outlier steps (``steps.stats``, docs/costs.md), so one
stalled step does not turn into "profiler overhead".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from profplug.analyzers.ab.analyze import too_few
from profplug.analyzers.ab.result import AbResult
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.steps.stats import STATISTIC

MEASURED = ("event", "none")  # the policies a prediction without device syncs stands for
# what attach() adds: dropped first, so attaching a stored overlay again starts afresh
ATTACHED = ("measured_policy", "predicted_band_us", "measured_median_step_us",
            "measured_ci95_us", "measured_rounds", "prediction_error_pct", "measured_speedup",
            "measured_speedup_ci95", "prediction_in_ci", "band_overlaps_ci",
            "predicted_speedup_in_ci", "profiler_overhead_pct")


def whatif_overlay(paths: Sequence[Path], run: str,
                   device_step_us: float | None = None,
                   device_ci_us: Sequence[float] | None = None,
                   ratio_ci: Sequence[float] | None = None) -> dict[str, Any]:
    """The what-if of the traces under ``paths`` (the run named ``run``), calibrated on the
    unprofiled device step ``device_step_us`` when given; ``device_ci_us`` (its 95% CI)
    widens the error band by how far the prediction moves across it, unless ``ratio_ci``
    (the event policy's speedup CI, paired with the device rounds) is given: then by its
    half-width (``whatif.unprofiled``)."""
    from profplug.analyzers.scale.load import load_timelines
    from profplug.analyzers.whatif import whatif, whatif_unprofiled

    tls = load_timelines(list(paths))
    traced = overlay(whatif(tls), run)
    if not device_step_us:
        return {**traced, "calibrated_on_us": None, "stored_by": _made_by()}
    ci = (float(device_ci_us[0]), float(device_ci_us[1])) if device_ci_us else None
    ratio = (float(ratio_ci[0]), float(ratio_ci[1])) if ratio_ci and len(ratio_ci) == 2 \
        else None
    cal = overlay(whatif_unprofiled(tls, device_step_us, step_ci_us=ci, ratio_ci=ratio), run)
    keep = ("recorded_step_us", "predicted_step_us", "band_pct", "predicted_speedup")
    return {**cal, "calibrated_on_us": round(device_step_us, 3),
            "recorded_step_us": traced["recorded_step_us"],
            "traced": {k: traced[k] for k in keep},
            "predicted_speedup": (round(device_step_us / cal["predicted_step_us"], 4)
                                  if cal["predicted_step_us"] > 0 else None),
            "warnings": [*traced["warnings"], *cal["warnings"]], "stored_by": _made_by()}


def calibrated(result: AbResult, run: str) -> dict[str, Any]:
    """The what-if of the traced run ``run`` with today's code, calibrated on the A/B's
    device median, its band carrying the event policy's paired speedup CI (``ab
    --whatif``); ProfplugError when the run does not read."""
    from profplug.analyzers.scale.pathargs import run_paths

    device = result.policy("device")
    event = next((x for x in result.summary if x.policy == "event"), None)
    ratio = event.speedup_ci95 if event is not None and event.paired else None
    return {**whatif_overlay(run_paths(run), run, device.median_step_us, device.ci95_us,
                             ratio), "recomputed": True}


def _made_by() -> str:
    """The version that made a what-if overlay (kept in ab.json: a stored one that cannot be
    recomputed later is labelled with it)."""
    from profplug.analyzers.core.version import __version__

    return f"profplug {__version__}"


def restored(result: AbResult, stored: dict[str, Any]) -> dict[str, Any]:
    """A what-if overlay read back from ``ab.json`` (``ab-report``): recomputed by
    :func:`calibrated` when its traced run (``run``) is at hand and reads, else kept as
    stored and marked so (``recomputed`` false, ``not_recomputed`` the reason)."""
    run = stored.get("run")
    if not isinstance(run, str) or not run:
        why = "no traced run named"
    elif not all(Path(p).exists() for p in run.split(",") if p) and not Path(run).exists():
        why = f"{run} not found"
    else:
        try:
            return calibrated(result, run)
        except (ProfplugError, OSError) as exc:
            why = f"{run} does not read: {exc}"
    return {**stored, "recomputed": False, "not_recomputed": why}


def overlay(res: Any, run: str) -> dict[str, Any]:
    """The pipeline's recorded and predicted step (us) of a ``WhatIfResult``, with the
    slowest rank's error band."""
    ranks = [r for r in res.ranks if r.basis == "step"] or list(res.ranks)
    slow = max(ranks, key=lambda r: r.predicted_us, default=None)
    recorded = max((r.recorded_us for r in ranks), default=0.0)
    predicted = slow.predicted_us if slow is not None else 0.0
    return {
        "run": run,
        "drop": res.drop,
        "dropped": res.dropped() if hasattr(res, "dropped") else None,
        "basis": ranks[0].basis if ranks else None,
        "statistic": STATISTIC,  # of the steps: recorded and predicted as in the report
        "recorded_step_us": round(recorded, 3),
        "predicted_step_us": round(predicted, 3),
        "band_pct": getattr(slow, "error_band_pct", 0.0) if slow is not None else 0.0,
        "predicted_speedup": round(recorded / predicted, 4) if predicted > 0 else None,
        "max_model_error_pct": round(res.max_model_error_pct, 2),
        "ranks": [{"rank": r.rank, "recorded_us": round(r.recorded_us, 3),
                   "predicted_us": round(r.predicted_us, 3),
                   "band_pct": getattr(r, "error_band_pct", 0.0)} for r in res.ranks],
        "warnings": list(res.warnings),
    }


def attach(result: AbResult, ov: dict[str, Any]) -> None:
    """Compare the prediction with the measured runs and keep it in ``result.whatif`` (an
    overlay attached before, e.g. read back from ``ab.json``, is compared afresh)."""
    ov = {k: v for k, v in ov.items() if k not in ATTACHED}
    policy = next((p for p in MEASURED if p in result.policies), None)
    measured = result.policy(policy) if policy else None
    device = result.policy("device")
    ov["measured_policy"] = policy
    pred, band = ov["predicted_step_us"], float(ov.get("band_pct") or 0.0)
    ov["predicted_band_us"] = [round(pred * (1 - band / 100), 3),
                               round(pred * (1 + band / 100), 3)]
    if measured is not None and measured.median_step_us is not None:
        med, ci = measured.median_step_us, measured.ci95_us
        ov["measured_median_step_us"] = med
        ov["measured_ci95_us"] = ci  # None: too few rounds for a CI
        ov["measured_rounds"] = measured.rounds_ok
        ov["prediction_error_pct"] = round((pred - med) / med * 100.0, 2)
        ov["measured_speedup"] = measured.speedup_vs_device
        ov["measured_speedup_ci95"] = measured.speedup_ci95
        if ci:
            (lo, hi), (blo, bhi) = ci, ov["predicted_band_us"]
            ov["prediction_in_ci"] = bool(lo <= pred <= hi)
            ov["band_overlaps_ci"] = bool(blo <= hi and lo <= bhi)
        sp, sci = ov["predicted_speedup"], measured.speedup_ci95
        if sci:
            ov["predicted_speedup_in_ci"] = bool(sp is not None and sci[0] <= sp <= sci[1])
    if device.median_step_us:
        ov["profiler_overhead_pct"] = round(
            (ov["recorded_step_us"] - device.median_step_us) / device.median_step_us * 100, 1)
    result.whatif = ov


def line(ov: dict[str, Any]) -> str:
    """One sentence: the prediction against the measurement."""
    cal = ov.get("calibrated_on_us")
    how = (f"at the unprofiled device step {cal:,.1f} us" if cal
           else "at the traced host speed")
    band = f" +-{ov['band_pct']:.0f}%" if ov.get("band_pct") else ""
    if ov.get("recomputed") is False:
        by = ov.get("stored_by")
        how += (f"; stored in ab.json by {by if isinstance(by, str) else 'an older profplug'} "
                f"(not recomputed: {ov.get('not_recomputed')})")
    head = (f"what-if ({ov['run']}, traced device run, {how}): predicted "
            f"{ov['predicted_step_us']:,.1f} us/step{band} without "
            f"{ov.get('dropped') or 'device syncs'}")
    if ov.get("measured_median_step_us") is None:
        return head + " (no measured event/none runs to compare)"
    med, ci = ov["measured_median_step_us"], ov.get("measured_ci95_us")
    if ci:
        where = ("inside the CI" if ov.get("prediction_in_ci") else
                 "its band overlaps the CI" if ov.get("band_overlaps_ci") else
                 "outside the CI")
        out = (f"{head}; measured {ov['measured_policy']} {med:,.1f} (95% CI {ci[0]:,.1f}-"
               f"{ci[1]:,.1f}): {where}, {ov['prediction_error_pct']:+.1f}%")
    else:
        out = (f"{head}; measured {ov['measured_policy']} {med:,.1f} ("
               f"{too_few(int(ov.get('measured_rounds') or 0))}): "
               f"{ov['prediction_error_pct']:+.1f}%")
    if ov.get("predicted_speedup") and ov.get("measured_speedup"):
        out += (f"; speedup predicted {ov['predicted_speedup']:.2f}x, measured "
                f"{ov['measured_speedup']:.2f}x")
    if ov.get("profiler_overhead_pct") is not None:
        out += f"; the traced device step is {ov['profiler_overhead_pct']:+.1f}% vs unprofiled"
    return out
