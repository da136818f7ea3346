"""``--unprofiled``: the step time users run at, from a traced run and one unprofiled number.

Under a profiler the host is slower (CUPTI's cost per CUDA call, ``record_function`` ranges,
observers on every op): 33-83% slower steps on the H200 samples. The trace cannot say by how
much, so the calibration comes from an unprofiled run of the same job *with* its
synchronizes (what users run today: ``profplug ab``'s device median, or the job's own
timing): the host scale ``s`` at which the replay of the traced run, nothing dropped, takes
that step time. The prediction without the synchronizes is made at the same ``s``
(``HostCosts(s, s)``): the profiler's cost is taken as proportional to the host's work, and
the same with and without the synchronizes (the calls and ranges are the same, less the
dropped ones).

Validated on the pp2_infer samples only (``docs/whatif.md``): six traced device runs,
calibrated on the unprofiled device step (4,618 us), predicted 2,639-2,972 us against the
unprofiled event step (2,525 us; three unprofiled event runs spread 2,184-3,012 us).
"""

from __future__ import annotations

from dataclasses import replace

from ..stalls import StallOptions
from ..timeline import Timeline
from .costs import HostCosts
from .model import DROP_NONE, DropSpec
from .predict import whatif
from .result import RankWhatIf, WhatIfResult

UNPROFILED_BAND_PCT = 5.0  # added to each rank's band: the calibration's own error
S_MIN, S_MAX = 0.05, 4.0


def _device_us(tls: list[Timeline], s: float, options: StallOptions | None) -> float:
    """The pipeline's step (mean over ranks) replayed at host scale ``s``, nothing dropped."""
    res = whatif(tls, DropSpec(kinds=DROP_NONE), options, host=HostCosts(s, s))
    return sum(r.predicted_us for r in res.ranks) / max(len(res.ranks), 1)


def fit_host_scale(tls: list[Timeline], step_us: float, options: StallOptions | None = None,
                   rel_tol: float = 1e-3, max_iter: int = 20) -> tuple[float, float]:
    """(s, the replayed step at s): the host scale at which the traced run, nothing dropped,
    replays at ``step_us`` (regula falsi on s; the step grows with s)."""
    lo, hi = S_MIN, S_MAX
    f_lo, f_hi = _device_us(tls, lo, options) - step_us, _device_us(tls, hi, options) - step_us
    if f_lo >= 0:  # even a host 20x faster is slower than measured: the GPU work alone is
        return lo, f_lo + step_us
    if f_hi <= 0:
        return hi, f_hi + step_us
    s, f = lo, f_lo
    side = 0
    for _ in range(max_iter):
        s = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        f = _device_us(tls, s, options) - step_us
        if abs(f) <= rel_tol * step_us:
            break
        if f < 0:
            lo, f_lo = s, f
            if side == -1:
                f_hi /= 2  # Illinois: keep the stale end from stalling the search
            side = -1
        else:
            hi, f_hi = s, f
            if side == 1:
                f_lo /= 2
            side = 1
    return s, f + step_us


def _rank(r: RankWhatIf, step_us: float, replayed_us: float) -> RankWhatIf:
    saving = step_us - r.predicted_us
    return replace(
        r, recorded_us=round(step_us, 3), replayed_us=round(replayed_us, 3),
        model_error_pct=round(100.0 * (replayed_us - step_us) / step_us, 2),
        saving_us=round(saving, 3), saving_pct=round(100.0 * saving / step_us, 2),
        indirect_us=round(saving - r.direct_us, 3),
        error_band_pct=round(r.error_band_pct + UNPROFILED_BAND_PCT, 1))


def whatif_unprofiled(tls: list[Timeline], step_us: float, drop: DropSpec | None = None,
                      options: StallOptions | None = None) -> WhatIfResult:
    """The what-if at the host speed of an unprofiled run whose step (with the
    synchronizes) took ``step_us``: ``recorded_us`` = ``step_us``, ``replayed_us`` = the
    calibrated replay of the trace, ``predicted_us`` = the unprofiled step without the
    dropped calls."""
    s, replayed = fit_host_scale(tls, step_us, options)
    res = whatif(tls, drop, options, host=HostCosts(s, s))
    ranks = [_rank(r, step_us, replayed) for r in res.ranks]
    note = (f"unprofiled: the host's costs are scaled by {s:.3f}, at which the traced run "
            f"replays at the given unprofiled step ({step_us:,.1f} us; replayed "
            f"{replayed:,.1f}); the prediction is made at the same scale. direct_us is "
            "still the traced run's")
    warnings = list(res.warnings)
    if s in (S_MIN, S_MAX):
        warnings.append(f"unprofiled: no host scale in [{S_MIN}, {S_MAX}] replays the trace "
                        f"at {step_us:,.1f} us (the GPU work alone takes longer, or the "
                        "number is not this job's)")
    return replace(res, ranks=ranks, assumptions=[*res.assumptions, note], warnings=warnings,
                   max_model_error_pct=max((abs(r.model_error_pct) for r in ranks),
                                           default=0.0))
