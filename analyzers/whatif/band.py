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
"""

from __future__ import annotations

from .result import RankWhatIf

BASE_PCT = 1.0
SLOPE_PCT = 14.0
COUPLED_PCT = 17.0


def host_bound_fraction(r: RankWhatIf) -> float:
    """Predicted host-bound idle over the predicted step (or window), 0..1."""
    if r.predicted_us <= 0:
        return 0.0
    return min(max(r.predicted_idle_by_cause_us.get("host_bound", 0.0) / r.predicted_us, 0.0),
               1.0)


def set_bands(ranks: list[RankWhatIf], coupled: bool) -> None:
    """Fill ``error_band_pct`` of every rank (see the module docstring)."""
    hb = max((host_bound_fraction(r) for r in ranks), default=0.0)
    common = BASE_PCT + SLOPE_PCT * hb + (COUPLED_PCT if coupled else 0.0)
    for r in ranks:
        r.error_band_pct = round(abs(r.model_error_pct) + common, 1)
