"""``--unprofiled``: the step time users run at, from a traced run and one unprofiled number.

Under a profiler the host is slower (CUPTI's cost per CUDA call, ``record_function`` ranges,
observers on every op), by an amount the trace cannot say, so the calibration comes from an
unprofiled run of the same job *with* its synchronizes (what users run today: ``profplug
ab``'s device median, or the job's own timing): the host scale ``s`` at which the replay of
the traced run, nothing dropped, takes that step time. The prediction without the
synchronizes is made at the same ``s`` (``HostCosts(s, s)``): the profiler's cost is taken as
proportional to the host's work, and the same with and without the synchronizes (the calls
and ranges are the same, less the dropped ones).

Validated (``docs/whatif.md``) against ``profplug ab`` on the 1-GPU H200 grid, calibrated on
ab's device median (the errors: ``benchmarks/2026-12-03/README.md``). A fixed profiler cost
per CUDA call instead of a proportional one, or scaling the gaps alone, predicted as well
(``benchmarks/whatif_calibration.py``): the proportional cost, the simplest, is kept.
The band adds the calibration's term: the prediction's change across the unprofiled step's
95% CI when it is given (``step_ci_us``), else ``UNPROFILED_BAND_PCT``. When the measured
run it is held against is paired with the calibration step (``ratio_ci``: ab's speedup CI,
each round's device and event steps from the same rounds, or the same process under
``--switch-every``), the term is that ratio's half-width instead: given the device median
the prediction starts from, the event median lies where the measured ratio puts it, and the
device step's own spread from round to round (large on a VM) is not in the comparison.

What the profiler changes on the GPU: a NCCL kernel that waited for a slower, profiled peer
is not GPU work to keep. Kernels paired across ranks get their wait from the replay; an
unpaired one (its peer's trace missing or not matched) has the part of it beyond its floor
scaled like the host it waited for (``costs.comm_floors``), in the calibration and in the
prediction alike.
"""

from __future__ import annotations

from dataclasses import replace

from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.model import DROP_NONE, DropSpec
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank
from profplug.analyzers.whatif.costs import HostCosts, comm_floors
from profplug.analyzers.whatif.predict import whatif
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult

# Added to each rank's band when the calibration step's own uncertainty is not given: the
# median over the grid's tuning shapes of the term ``step_ci_us`` gives (docs/whatif.md).
UNPROFILED_BAND_PCT = 7.0
MAX_STEP_US = 3.6e9  # --unprofiled: one hour per step at most (1e308 printed 10^308 us)
MIN_STEP_US = 1e-3  # and 1 ns at least (1e-308 made the predicted speedup overflow to inf)
S_MIN, S_MAX = 0.05, 4.0


def host_costs(tls: list[Timeline], s: float, memo: Memo | None = None) -> HostCosts:
    """Host costs at scale ``s``, unpaired NCCL kernels' waits scaled with them."""
    return HostCosts(s, s, comm_floor_ns=comm_floors(tls, memo))


def _device_replay(tls: list[Timeline], s: float, options: StallOptions | None,
                   ranks: list[RankResult] | None, memo: Memo | None) -> dict[int, float]:
    """Each rank's step replayed at host scale ``s`` (one ``s`` for every rank), nothing
    dropped."""
    return {r.rank: r.predicted_us for r in _device_ranks(tls, s, options, ranks, memo)}


def _device_ranks(tls: list[Timeline], s: float, options: StallOptions | None,
                  ranks: list[RankResult] | None, memo: Memo | None) -> list[RankWhatIf]:
    """Each rank's replay at host scale ``s``, nothing dropped (its idle by cause too)."""
    return whatif(tls, DropSpec(kinds=DROP_NONE), options, host=host_costs(tls, s, memo),
                  ranks=ranks, memo=memo).ranks


def _mean(per_rank: dict[int, float]) -> float:
    """The pipeline's step the fit aims at: the mean over ranks of their replays."""
    return sum(per_rank.values()) / max(len(per_rank), 1)


def fit_host_scale(tls: list[Timeline], step_us: float, options: StallOptions | None = None,
                   rel_tol: float = 1e-3, max_iter: int = 20,
                   ranks: list[RankResult] | None = None, memo: Memo | None = None
                   ) -> tuple[float, float]:
    """(s, the replayed step at s): the host scale at which the traced run, nothing dropped,
    replays at ``step_us`` (regula falsi on s; the step grows with s). ``ranks``: the
    timelines' stall analyses, made once here when not given (every step of the search
    replays the same recorded run); ``memo``: the caller's (``core.memo``), default this
    search's own (its what-ifs share the matching, launch calls and kinds)."""
    s, per_rank = fit_per_rank(tls, step_us, options, rel_tol, max_iter, ranks, memo)
    return s, _mean(per_rank)


def fit_per_rank(tls: list[Timeline], step_us: float, options: StallOptions | None = None,
                 rel_tol: float = 1e-3, max_iter: int = 20,
                 ranks: list[RankResult] | None = None, memo: Memo | None = None
                 ) -> tuple[float, dict[int, float]]:
    """:func:`fit_host_scale`, with each rank's own replayed step at that one scale."""
    if ranks is None:
        ranks = _recorded(tls, options)
    memo = memo or Memo()
    lo, hi = S_MIN, S_MAX
    at_lo = _device_replay(tls, lo, options, ranks, memo)
    f_lo = _mean(at_lo) - step_us
    if f_lo >= 0:  # even a host 20x faster is slower than measured: the GPU work alone is
        return lo, at_lo
    at_hi = _device_replay(tls, hi, options, ranks, memo)
    f_hi = _mean(at_hi) - step_us
    if f_hi <= 0:
        return hi, at_hi
    s, at = lo, at_lo
    side = 0
    for _ in range(max_iter):
        s = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        at = _device_replay(tls, s, options, ranks, memo)
        f = _mean(at) - step_us
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
    return s, at


def _recorded(tls: list[Timeline], options: StallOptions | None) -> list[RankResult]:
    """The recorded timelines' stall analyses (what every replay of the fit compares with)."""
    return [analyze_rank(tl, options, brief=True) for tl in tls if tl.n_gpu]


def _rank(r: RankWhatIf, step_us: float, replayed_us: float, cal_pct: float,
          idle: dict[str, float] | None = None) -> RankWhatIf:
    """A rank at the unprofiled step: ``recorded_us`` the given step, ``replayed_us`` the
    calibrated replay (its misfit, the model error, widens the band: a band is never
    narrower than the calibration's miss), ``recorded_idle_by_cause_us`` the calibrated
    replay's (``idle``), ``traced_us`` the trace's step."""
    saving = step_us - r.predicted_us
    misfit = round(100.0 * (replayed_us - step_us) / step_us, 2)

    def widened(band: float | None) -> float | None:
        return None if band is None else round(band + cal_pct + abs(misfit), 1)

    return replace(
        r, recorded_us=round(step_us, 3), replayed_us=round(replayed_us, 3),
        model_error_pct=misfit, traced_us=r.recorded_us,
        saving_us=round(saving, 3), saving_pct=round(100.0 * saving / step_us, 2),
        indirect_us=round(saving - r.direct_us, 3),
        recorded_idle_by_cause_us=dict(idle) if idle is not None
        else r.recorded_idle_by_cause_us,
        error_band_pct=widened(r.error_band_pct), run_band_pct=widened(r.run_band_pct))


def calibration_band(tls: list[Timeline], res: WhatIfResult, step_ci_us: tuple[float, float],
                     drop: DropSpec | None = None, options: StallOptions | None = None,
                     ranks: list[RankResult] | None = None, memo: Memo | None = None
                     ) -> dict[int, float]:
    """Per rank, +-% of the prediction that the calibration step's uncertainty carries: the
    prediction made at each end of ``step_ci_us`` (the unprofiled device step's 95% CI),
    its largest distance from ``res``'s, over ``res``'s prediction."""
    out = {r.rank: 0.0 for r in res.ranks}
    if ranks is None:
        ranks = _recorded(tls, options)
    memo = memo or Memo()
    for end in step_ci_us:
        s, _ = fit_host_scale(tls, float(end), options, ranks=ranks, memo=memo)
        other = whatif(tls, drop, options, host=host_costs(tls, s, memo), ranks=ranks,
                       memo=memo)
        for r in res.ranks:
            if r.predicted_us > 0:
                d = 100.0 * abs(other.rank(r.rank).predicted_us - r.predicted_us) / r.predicted_us
                out[r.rank] = max(out[r.rank], d)
    return out


def whatif_unprofiled(tls: list[Timeline], step_us: float, drop: DropSpec | None = None,
                      options: StallOptions | None = None,
                      step_ci_us: tuple[float, float] | None = None,
                      ratio_ci: tuple[float, float] | None = None,
                      memo: Memo | None = None) -> WhatIfResult:
    """The what-if at the host speed of an unprofiled run whose step (with the
    synchronizes) took ``step_us``: ``recorded_us`` = ``step_us``, ``replayed_us`` = the
    calibrated replay of the trace, ``predicted_us`` = the unprofiled step without the
    dropped calls. ``step_ci_us``: ``step_us``'s 95% CI (``profplug ab``'s device CI): the
    band then carries the prediction's change across it (:func:`calibration_band`) instead
    of ``UNPROFILED_BAND_PCT``; ``ratio_ci``: the measured speedup's 95% CI of a run paired
    with that step (``profplug ab``'s): the band carries its half-width instead (the module
    docstring); ``memo``: the caller's (``core.memo``), default this call's own: its ~10
    what-ifs of one run share the matching, launch calls and symbol kinds."""
    return _unprofiled(tls, step_us, drop, options, step_ci_us, ratio_ci, memo or Memo())


def _unprofiled(
    tls: list[Timeline],
    step_us: float,
    drop: DropSpec | None,
    options: StallOptions | None,
    step_ci_us: tuple[float, float] | None,
    ratio_ci: tuple[float, float] | None,
    memo: Memo,
) -> WhatIfResult:
    """:func:`whatif_unprofiled`; ``memo``: shared by its what-ifs."""
    stalls = _recorded(tls, options)
    ci_note = _ci_note(step_us, step_ci_us)
    usable_ci = None if ci_note else step_ci_us
    host_scale, replayed_by_rank = fit_per_rank(tls, step_us, options, ranks=stalls, memo=memo)
    replayed_us = _mean(replayed_by_rank)
    idle_by_rank = {
        r.rank: r.predicted_idle_by_cause_us
        for r in _device_ranks(tls, host_scale, options, stalls, memo)
    }
    res = whatif(tls, drop, options, host=host_costs(tls, host_scale, memo), ranks=stalls,
                 memo=memo)
    paired_pct = ratio_pct(ratio_ci)
    if paired_pct is not None:
        calibration_pct = {r.rank: paired_pct for r in res.ranks}
    elif usable_ci:
        calibration_pct = calibration_band(tls, res, usable_ci, drop, options, stalls, memo)
    else:
        calibration_pct = {r.rank: UNPROFILED_BAND_PCT for r in res.ranks}
    ranks = [
        _rank(
            r,
            step_us,
            replayed_by_rank.get(r.rank, replayed_us),
            calibration_pct[r.rank],
            idle_by_rank.get(r.rank),
        )
        for r in res.ranks
    ]
    note = _scale_note(host_scale, step_us, replayed_by_rank)
    if paired_pct is not None and ratio_ci is not None:
        note += (
            f"; the band carries the measured speedup's 95% CI ({ratio_ci[0]:.3f}-"
            f"{ratio_ci[1]:.3f}x, paired with the step): +-{paired_pct:.1f}%"
        )
    elif usable_ci:
        note += (
            f"; the band carries the prediction's change over the step's 95% CI "
            f"({usable_ci[0]:,.1f}-{usable_ci[1]:,.1f} us): up to "
            f"{max(calibration_pct.values(), default=0.0):.1f}%"
        )
    warnings = list(res.warnings) + ([ci_note] if ci_note else [])
    if host_scale in (S_MIN, S_MAX):
        warnings.append(
            f"unprofiled: no host scale in [{S_MIN}, {S_MAX}] replays the trace "
            f"at {step_us:,.1f} us (the GPU work alone takes longer, or the "
            "number is not this job's): the band carries the replay's miss"
        )
    return replace(
        res,
        ranks=ranks,
        assumptions=[*res.assumptions, note],
        warnings=warnings,
        calibrated_on_us=round(step_us, 3),
        max_model_error_pct=max((abs(r.model_error_pct) for r in ranks), default=0.0),
    )


def _ci_note(step_us: float, step_ci_us: tuple[float, float] | None) -> str | None:
    """The warning when the given 95% CI does not hold the given step (the CI is then not
    used), else None."""
    if step_ci_us is None or step_ci_us[0] <= step_us <= step_ci_us[1]:
        return None
    return (
        f"unprofiled-ci: the given 95% CI {step_ci_us[0]:,.1f}-"
        f"{step_ci_us[1]:,.1f} us does not hold the given step {step_us:,.1f} us: "
        f"not used (the band carries +-{UNPROFILED_BAND_PCT:.0f}% instead)"
    )


def _scale_note(host_scale: float, step_us: float, replayed_by_rank: dict[int, float]) -> str:
    """The assumption that says at which host scale the prediction is made."""
    each = ", ".join(f"rank {k} {v:,.1f}" for k, v in sorted(replayed_by_rank.items()))
    return (
        f"unprofiled: the host's costs of every rank are scaled by {host_scale:.3f} (one "
        f"scale for all ranks), at which the traced run replays at the given unprofiled "
        f"step ({step_us:,.1f} us, the mean over ranks; replayed "
        f"{_mean(replayed_by_rank):,.1f}"
        + (f": {each}" if len(replayed_by_rank) > 1 else "")
        + "); every rank's prediction is made at the same scale. direct_us is "
        "still the traced run's"
    )


def ratio_pct(ci: tuple[float, float] | None) -> float | None:
    """A speedup CI's half-width, % of its midpoint; None without a usable CI."""
    if ci is None or not 0 < ci[0] <= ci[1] < float("inf"):
        return None
    return round(100.0 * (ci[1] - ci[0]) / (ci[1] + ci[0]), 1)


def parse_ci(text: str | None, step_us: float | None) -> tuple[float, float] | None:
    """``--unprofiled-ci LO,HI`` (us): two numbers, 0 < LO <= HI, with ``--unprofiled``."""
    if text is None:
        return None
    if step_us is None:
        raise ProfplugError("--unprofiled-ci goes with --unprofiled (the step it is the CI of)")
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ProfplugError(f"--unprofiled-ci takes LO,HI in us (got {text!r})") from None
    if not MIN_STEP_US <= lo <= hi <= MAX_STEP_US:  # also NaN
        raise ProfplugError(f"--unprofiled-ci: need {MIN_STEP_US:g} <= LO <= HI <= "
                            f"{MAX_STEP_US:g} us (got {one_line(text)!r})")
    return lo, hi
