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

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from profplug.analyzers.ab.analyze import too_few
from profplug.analyzers.ab.result import AbResult
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.vocabulary import SyncPolicy
from profplug.analyzers.steps.stats import STATISTIC
from profplug.analyzers.whatif import figures

CALIBRATION_SLACK = 0.005  # a stored calibration step this far from ab's: another A/B's
# the policies a prediction without device syncs stands for
MEASURED = (SyncPolicy.EVENT, SyncPolicy.NONE)
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
    keep = ("recorded_step_us", "predicted_step_us", "band_pct", "band_for",
            "predicted_speedup")
    return {**cal, "calibrated_on_us": round(device_step_us, 3),
            "recorded_step_us": traced["recorded_step_us"],
            "traced": {k: traced[k] for k in keep},
            "warnings": [*traced["warnings"], *cal["warnings"]], "stored_by": _made_by()}


def calibrated(result: AbResult, run: str, base: Path | None = None) -> dict[str, Any]:
    """The what-if of the traced run ``run`` with today's code, calibrated on the A/B's
    device median, its band carrying the event policy's paired speedup CI (``ab
    --whatif``); ProfplugError when the run does not read. ``base``: the folder of the
    ``ab.json`` it goes into; ``run_path`` is stored relative to it (an A/B folder moved or
    cloned with its traces still finds them), else resolved."""
    from profplug.analyzers.scale.fingerprint import run_fingerprint
    from profplug.analyzers.scale.pathargs import run_paths

    device = result.policy("device")
    event = next((x for x in result.summary if x.policy == SyncPolicy.EVENT), None)
    ratio = event.speedup_ci95 if event is not None and event.paired else None
    paths = run_paths(run)
    return {**whatif_overlay(paths, run, device.median_step_us, device.ci95_us, ratio),
            # where the run is, whatever the folder ab-report runs in, and which run it is
            "run_path": ",".join(_stored_path(p, base) for p in paths),
            "run_fingerprint": run_fingerprint(paths), "recomputed": True}


def _stored_path(path: str | Path, base: Path | None) -> str:
    """``path`` resolved, and relative to ``base`` (resolved) when that is given."""
    real = os.path.realpath(path)
    return real if base is None else os.path.relpath(real, os.path.realpath(base))


def _made_by() -> str:
    """The version that made a what-if overlay (kept in ab.json: a stored one that cannot be
    recomputed later is labelled with it)."""
    from profplug.analyzers.core.version import __version__

    return f"profplug {__version__}"


def stored_run_path(stored: dict[str, Any], base: Path | None) -> str | None:
    """Where a stored overlay's traced run is: ``run_path`` (resolved, or relative to the
    folder of ab.json, ``base``, when stored), else (an older ab.json) ``run`` as given, a
    relative path taken against ``base``, never against the folder ab-report happens to
    run in."""
    path, run = stored.get("run_path"), stored.get("run")
    if isinstance(path, str) and path:
        if base is None:
            return path
        return ",".join(p if Path(p).is_absolute() else str(base / p) for p in path.split(","))
    if not isinstance(run, str) or not run:
        return None
    if base is None or Path(run).is_absolute():
        return run
    parts = [run] if Path(run).exists() and "," not in run else run.split(",")
    return ",".join(str(base / p) if not Path(p).is_absolute() else p for p in parts if p)


def restored(result: AbResult, stored: dict[str, Any],
             base: Path | None = None) -> dict[str, Any]:
    """A what-if overlay read back from ``ab.json`` (``ab-report``): recomputed by
    :func:`calibrated` when its traced run is at hand (:func:`stored_run_path`), still the
    same run (``run_fingerprint``, when stored) and reads, else kept as stored and marked
    so (``recomputed`` false, ``not_recomputed`` the reason)."""
    from profplug.analyzers.scale.fingerprint import run_fingerprint
    from profplug.analyzers.scale.pathargs import split_paths

    run, path = stored.get("run"), stored_run_path(stored, base)
    if path is None:
        why = "no traced run named"
    elif not all(p.exists() for p in split_paths(path)):
        why = f"{run or path} not found"  # as stored: the message is the same on every machine
    elif stored.get("run_fingerprint") and \
            run_fingerprint(split_paths(path)) != stored["run_fingerprint"]:
        why = f"{run or path} no longer holds the traced run (its traces' content differs)"
    else:
        try:
            return {**calibrated(result, path, base), "run": run}
        except (ProfplugError, OSError) as exc:
            why = f"{run or path} does not read: {exc}"
    kept = {**stored, "recomputed": False, "not_recomputed": why}
    cal, dev = stored.get("calibrated_on_us"), result.policy("device").median_step_us
    if isinstance(cal, (int, float)) and dev and abs(cal - dev) > CALIBRATION_SLACK * dev:
        kept["warnings"] = [*(stored.get("warnings") or []),
                            f"{figures.STORED} calibrated on a device step of {cal:,.1f} us, "
                            f"not on this A/B's {dev:,.1f} us: not this A/B's prediction"]
    return kept


def overlay(res: Any, run: str) -> dict[str, Any]:
    """The pipeline's recorded and predicted step (us) of a ``WhatIfResult``, its band and
    speedup, as every output states them (``whatif.figures``: the slowest predicted rank's
    prediction, its band for the what-if's own target). Nothing to drop: no prediction
    (``predicted_step_us`` the replay, ``band_pct`` and ``predicted_speedup`` None,
    ``nothing_to_drop`` true)."""
    ranks = figures.stepped(res)
    pred = figures.prediction(res)
    slow = figures.pipeline_rank(res)
    recorded = max((r.recorded_us for r in ranks), default=0.0)
    predicted = pred.predicted_us if pred is not None else (
        slow.predicted_us if slow is not None else 0.0)
    target = figures.own_target(res)
    return {
        "run": run,
        "drop": res.drop,
        "dropped": res.dropped() if hasattr(res, "dropped") else None,
        "basis": ranks[0].basis if ranks else None,
        "statistic": STATISTIC,  # of the steps: recorded and predicted as in the report
        "recorded_step_us": round(recorded, 3),
        "predicted_step_us": round(predicted, 3),
        "predicted_rank": None if slow is None else slow.rank,
        "band_pct": None if pred is None else pred.band_pct,
        "band_for": figures.TARGET_WORDS[target],
        "nothing_to_drop": pred is None,
        "predicted_speedup": None if pred is None or pred.speedup is None
        else round(pred.speedup, 4),
        "max_model_error_pct": round(res.max_model_error_pct, 2),
        "ranks": [{"rank": r.rank, "recorded_us": round(r.recorded_us, 3),
                   "predicted_us": round(r.predicted_us, 3),
                   "band_pct": figures.band_pct(r, target)} for r in res.ranks],
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
    if ov.get("nothing_to_drop"):  # no prediction to set against the measurement
        result.whatif = ov
        return
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
    band = (f" +-{ov['band_pct']:.0f}% for {ov.get('band_for') or 'an unprofiled run'}"
            if ov.get("band_pct") else "")
    if ov.get("recomputed") is False:
        by = ov.get("stored_by")
        how += (f"; stored in ab.json by {by if isinstance(by, str) else 'an older profplug'} "
                f"(not recomputed: {ov.get('not_recomputed')})")
    notes = "".join(f"; warning: {w}" for w in
                    figures.answer_warnings(list(ov.get("warnings") or [])))
    if ov.get("nothing_to_drop"):
        return (f"what-if ({ov['run']}, traced run, {how}): dropping "
                f"{ov.get('dropped') or 'the device syncs'} changes no step in the replay: "
                f"nothing to drop, no speedup predicted{notes}")
    head = (f"what-if ({ov['run']}, traced device run, {how}): predicted "
            f"{ov['predicted_step_us']:,.1f} us/step"
            + (f" on rank {ov['predicted_rank']}" if ov.get("predicted_rank") is not None
               else "") + f"{band} without {ov.get('dropped') or 'device syncs'}{notes}")
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
