"""The error band of a what-if prediction, from the measured validation (``docs/whatif.md``).

    error_band_pct = |replay error %| + BASE_PCT + SLOPE_PCT * host_bound
                     (+ COUPLED_PCT when NCCL kernels were paired across ranks)

``host_bound``: the largest predicted host-bound fraction over the run's ranks (GPU idle the
stall analysis charges to a host that was not blocked, per predicted step, over the predicted
step): ~0 when the GPU is the bottleneck, ~1 when every kernel waits for its launch. The max,
because a pipeline's step is set by its slowest rank. The replay error says how well the model
reproduces the trace itself; the rest is how far predictions landed from measured event runs
of the same host speed (``benchmarks/whatif_grid.py table``, ``host-adj``): on the 1-GPU H200
grid (Kineto and Nsight) |error| stayed under 1 + 14.1 * host_bound % in every pair (0.6%
at 0.02, 1.7% at 0.17, 13.8% at 0.91; the slope is rounded up to 15); on the 2-rank NCCL
samples up to 12 points more (23% at 0.72). The band is about the model at the traced host
speed: a run whose host is slower or faster (on the grid's VM, +-40% from one process to the
next) moves on top of it.
"""

from __future__ import annotations

from .result import RankWhatIf

BASE_PCT = 1.0
SLOPE_PCT = 15.0
COUPLED_PCT = 12.0


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
