"""The error band of a what-if prediction, from the measured validation (``docs/whatif.md``).

    error_band_pct = |replay error %| + BASE_PCT + SLOPE_PCT * host_bound
                     (+ COUPLED_PCT when NCCL kernels were paired across ranks)

``host_bound``: the largest predicted host-bound fraction over the run's ranks (GPU idle the
stall analysis charges to a host that was not blocked, per predicted step, over the predicted
step): ~0 when the GPU is the bottleneck, ~1 when every kernel waits for its launch. The max,
because a pipeline's step is set by its slowest rank. The band is +-% of ``predicted_us``.
The replay error says how well the model reproduces the trace itself; the rest is fitted
(``benchmarks/whatif_grid.py table`` prints the fit, ``band fit``) on how far predictions
landed from measured event runs at the same host speed (``host-adj`` pairs, |error| as % of
the prediction) on the 1-GPU H200 grid's tuning shapes, Kineto and Nsight (93 pairs; the
held-out shapes are not used): the slope needed at base 1 is 13.02 (GPU-bound pairs: base
0.7), rounded up to 14; on the 2-rank NCCL samples the pairs need up to 16.7 points more at
that slope (17). The band is about the model at the traced host speed: a run whose host is
slower or faster (on the grid's VM, up to 2x from one process to the next) moves on top of
it. ``--unprofiled`` adds its calibration's term (``unprofiled.py``).

``run_band_pct`` is the band for a separate run of the other policy (a user's own A/B, a
traced event run): ``|replay error %| + BASE_PCT + SLOPE_PCT * host_bound + RUN_SPREAD_PCT *
host_share`` (the coupled term, fitted on separate traced runs, was that spread: replaced,
not added), never under ``error_band_pct``, where ``host_share`` is
``host_bound`` (1 where the data-flow bound holds the step to a host's cadence): the host's
speed is drawn per process, and it moves a step as far as the host sets it.
"""

from __future__ import annotations

from profplug.analyzers.whatif.result import RankWhatIf

BASE_PCT = 1.0
SLOPE_PCT = 14.0
COUPLED_PCT = 17.0
# a separate run of the other policy: its host's speed is drawn per process, which moves
# the step as far as the host sets it; the spread of separate unprofiled runs of one job
# (docs/whatif.md, "The error band")
RUN_SPREAD_PCT = 30.0


def host_bound_fraction(r: RankWhatIf) -> float:
    """Predicted host-bound idle over the predicted step (or window), 0..1."""
    if r.predicted_us <= 0:
        return 0.0
    return min(max(r.predicted_idle_by_cause_us.get("host_bound", 0.0) / r.predicted_us, 0.0),
               1.0)


def withhold_bands(ranks: list[RankWhatIf]) -> None:
    """No band where the prediction's own caveat says it is unreliable (peer ranks missing:
    their waits stay in the recorded NCCL kernels): ``error_band_pct`` and ``run_band_pct``
    None (JSON null, "n/a" in the table), as the finding line withholds the prediction."""
    for r in ranks:
        r.error_band_pct = r.run_band_pct = None


def set_bands(ranks: list[RankWhatIf], coupled: bool) -> None:
    """Fill ``error_band_pct`` of every rank (see the module docstring)."""
    hb = max((host_bound_fraction(r) for r in ranks), default=0.0)
    common = BASE_PCT + SLOPE_PCT * hb + (COUPLED_PCT if coupled else 0.0)
    # the share of the step the host sets: its host-bound idle, or all of it where the
    # data-flow bound holds the step to a host's cadence (bound.py)
    host_share = 1.0 if any(r.bound_binds for r in ranks) else hb
    # the coupled term was fitted on separate traced runs of the 2-rank samples: it is that
    # spread already, which the run band's own term replaces rather than adds to
    own = BASE_PCT + SLOPE_PCT * hb + RUN_SPREAD_PCT * host_share
    for r in ranks:
        r.error_band_pct = round(abs(r.model_error_pct) + common, 1)
        r.run_band_pct = round(max(r.error_band_pct, abs(r.model_error_pct) + own), 1)
