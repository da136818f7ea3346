"""The statistics of an A/B: medians, bootstrap CIs over rounds, paired speedups.

Steps within a run are correlated (one process, one warm state, one placement of its
memory), so the unit of replication is the round, not the step:

- a run's step time: per step, the slowest rank (the pipeline moves at its pace), then the
  median over the window's steps (:func:`pipeline_steps`, :func:`run_median`);
- a policy's step time: the median over rounds of its runs' medians;
- its 95% CI: percentile bootstrap, resampling rounds with replacement (``RESAMPLES``
  resamples, seeded: the same data give the same CI) (:func:`median_ci`), from
  ``MIN_ROUNDS`` rounds on (the bootstrap of 2 values is their range, or a point: no CI);
- a speedup over the baseline: ratio of the medians over the rounds where both ran ok; its
  CI, from ``MIN_ROUNDS`` such rounds on, is the wider of two intervals that both pair the
  policies by round index (which cancels drift slower than a round): the percentile
  bootstrap resampling rounds, and Student's t on the per-round log ratios. With a handful
  of rounds the bootstrap alone is too narrow (it cannot see beyond the spread it was
  given): an A/A check, where the policies run the same code, can come out "slower" with
  it while t's interval holds 1.0 (``benchmarks/2026-12-03/README.md``). With fewer
  paired rounds, the ratio alone (:func:`speedup_ci`);
- rounds needed when the CI contains 1.0: the CI's half-width (in log ratio) scales as
  t(n-1)/sqrt(n), so it would exclude 1.0 after the first n where that half-width falls
  below ``|log s|`` (:func:`rounds_needed`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

RESAMPLES = 10_000
SEED = 20_261_201
LEVEL = 0.95
MAX_ROUNDS_NEEDED = 10_000
MIN_ROUNDS = 3  # rounds (paired rounds, for a speedup) a CI needs


def pipeline_steps(ranks_step_us: Sequence[Sequence[float]]) -> np.ndarray:
    """Per step, the slowest rank's time (ranks truncated to the shortest window)."""
    arrays = [np.asarray(s, dtype=float) for s in ranks_step_us if len(s)]
    if not arrays:
        return np.zeros(0)
    n = min(a.size for a in arrays)
    slowest: np.ndarray = np.max(np.stack([a[:n] for a in arrays]), axis=0)
    return slowest


def run_median(ranks_step_us: Sequence[Sequence[float]]) -> float | None:
    """A run's pipeline step time: the median of :func:`pipeline_steps` (None: no steps)."""
    steps = pipeline_steps(ranks_step_us)
    return float(np.median(steps)) if steps.size else None


# Student's t, two-sided 95% (the 0.975 quantile), df = 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile(df: int, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom (the
    table at 95% up to 30 df; else the Cornish-Fisher expansion, within 0.3% from 30 df)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if level == LEVEL and df <= len(_T975):
        return _T975[df - 1]
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def paired_t_interval(base: np.ndarray, other: np.ndarray, level: float = LEVEL
                      ) -> tuple[float, float]:
    """The CI of base/other from Student's t on the per-round log ratios (exp of mean +-
    t * sd / sqrt(n)); needs >= 2 pairs."""
    r = np.log(base / other)
    half = t_quantile(r.size - 1, level) * float(np.std(r, ddof=1)) / math.sqrt(r.size)
    m = float(r.mean())
    return math.exp(m - half), math.exp(m + half)


def _rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(SEED if seed is None else seed)


def _interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    a = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(samples, [a, 100.0 - a])
    return float(lo), float(hi)


def median_ci(values: Sequence[float], resamples: int = RESAMPLES, seed: int | None = None,
              level: float = LEVEL) -> tuple[float, float | None, float | None]:
    """(median, lo, hi): the median of ``values`` (one per round) and its percentile
    bootstrap CI; ``lo``, ``hi`` None with fewer than ``MIN_ROUNDS`` values."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("no values")
    med = float(np.median(v))
    if v.size < MIN_ROUNDS:
        return med, None, None
    idx = _rng(seed).integers(0, v.size, size=(resamples, v.size))
    lo, hi = _interval(np.median(v[idx], axis=1), level)
    return med, lo, hi


def speedup_ci(base: Sequence[float | None], other: Sequence[float | None],
               resamples: int = RESAMPLES, seed: int | None = None, level: float = LEVEL
               ) -> tuple[float, float | None, float | None, int]:
    """(speedup, lo, hi, paired rounds): median(base) / median(other).

    ``base`` and ``other`` hold one value per round (None: that run failed). Over the rounds
    where both are present; from ``MIN_ROUNDS`` such rounds on the CI is the wider of the
    paired percentile bootstrap and the paired t interval (see the module docstring), else
    ``lo``, ``hi`` are None. With no common round, the ratio of all values' medians.
    """
    pairs = [(b, o) for b, o in zip(base, other, strict=True) if b is not None and o is not None]
    if not pairs:
        b = np.array([x for x in base if x is not None], dtype=float)
        o = np.array([x for x in other if x is not None], dtype=float)
        if not b.size or not o.size:
            raise ValueError("a policy has no value")
        return float(np.median(b) / np.median(o)), None, None, 0
    b = np.array([p[0] for p in pairs])
    o = np.array([p[1] for p in pairs])
    s = float(np.median(b) / np.median(o))
    if len(pairs) < MIN_ROUNDS:
        return s, None, None, len(pairs)
    idx = _rng(seed).integers(0, b.size, size=(resamples, b.size))
    lo, hi = _interval(np.median(b[idx], axis=1) / np.median(o[idx], axis=1), level)
    t_lo, t_hi = paired_t_interval(b, o, level)
    return s, min(lo, t_lo), max(hi, t_hi), len(pairs)


def resolved(lo: float, hi: float) -> bool:
    """Whether a speedup CI excludes 1.0 (no difference)."""
    return not lo <= 1.0 <= hi


def rounds_needed(speedup: float, lo: float, hi: float, rounds: int) -> int | None:
    """Rounds after which a CI this wide would exclude 1.0, if the measured speedup is real:
    the half-width (in log ratio) scales as t(n-1) / sqrt(n) (the spread it implies at
    ``rounds`` held fixed); None when the speedup is exactly 1 or the CI is empty."""
    if speedup <= 0 or lo <= 0 or hi <= lo or rounds < 1:
        return None
    d = abs(math.log(speedup))
    if d == 0.0:
        return None
    half = (math.log(hi) - math.log(lo)) / 2.0
    spread = half * math.sqrt(rounds) / (t_quantile(rounds - 1) if rounds >= 2 else 1.0)
    for n in range(rounds + 1, MAX_ROUNDS_NEEDED + 1):
        if t_quantile(n - 1) * spread / math.sqrt(n) < d:
            return n
    return MAX_ROUNDS_NEEDED
