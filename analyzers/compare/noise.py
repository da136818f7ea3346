"""Is a step-time difference between two runs beyond the noise? (``compare``'s test).

Two traced runs give one series of per-step times each. A difference of their centers is
called a difference only when it is beyond *both*:

- the runs' **per-step spread**: the larger of the two runs' scaled MAD
  (:func:`steps.stats.scaled_mad`) relative to its center. Two repeats of one job differ from
  run to run by about as much as their steps differ from each other (the shipped repeats of
  the decode loop: ``benchmarks/2026-12-03/README.md``), and one run cannot measure
  the run-to-run part: ``profplug ab`` does, over rounds;
- the **bootstrap CI** of the relative difference of the centers: each run's steps resampled
  in circular blocks of :func:`block_length` consecutive steps (steps of one run are
  correlated: one warm state, one placement), ``RESAMPLES`` times with a fixed seed (the
  same data give the same answer), the 95% percentile interval as in ``ab/stats.py``.

``noise_pct`` = the larger of the two (the +- printed with "no difference beyond the noise");
``resolved`` = ``|diff_pct| > noise_pct``. The center of a run is :func:`steps.stats.center`
(the median over its non-outlier steps). Per-step values in us; percentages of run A's center.

A run's series (:func:`pipeline_step_us`): per step, the slowest rank's GPU period (first op
of a step to the first op of the next: the pipeline moves at its slowest rank's pace), the
ranks cut to the shortest; without GPU steps (a CPU run), the host step ranges' durations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from profplug.analyzers.steps.stats import center, scaled_mad

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import Report
    from profplug.analyzers.stalls.rank import RankResult

RESAMPLES = 2_000
SEED = 20_261_201
LEVEL = 0.95
MIN_STEPS = 3  # fewer steps in a run: no test (no spread to speak of)


def rank_step_us(r: RankResult) -> tuple[np.ndarray, str]:
    """One rank's per-step times (us) and their basis: ``"gpu period"`` (the diff of the
    complete steps' GPU starts), else ``"host step"`` (the step ranges), else empty."""
    starts = np.asarray(r.step_starts_ns, dtype=float)
    if starts.size >= 2:
        return np.diff(starts) / 1000.0, "gpu period"
    if r.steps is not None and r.steps.step_us:
        return np.asarray(r.steps.step_us, dtype=float), "host step"
    return np.zeros(0), ""


def pipeline_step_us(rep: Report) -> tuple[np.ndarray, str]:
    """Per step, the slowest rank's time (us), and the basis (see the module docstring);
    GPU periods when every rank that has steps has them, else host step ranges."""
    series = [rank_step_us(r) for r in rep.ranks]
    series = [(x, b) for x, b in series if x.size]
    if not series:
        return np.zeros(0), ""
    gpu = [x for x, b in series if b == "gpu period"]
    use, basis = (gpu, "gpu period") if len(gpu) == len(series) else (
        [x for x, b in series if b == "host step"] or gpu,
        "host step" if any(b == "host step" for _, b in series) else "gpu period")
    n = min(x.size for x in use)
    return np.max(np.stack([x[:n] for x in use]), axis=0), basis


def spread_pct(steps: Sequence[float] | np.ndarray) -> float:
    """The per-step spread: scaled MAD / center * 100 (0 with no steps)."""
    x = np.asarray(steps, dtype=float)
    c = center(x) if x.size else 0.0
    return 100.0 * scaled_mad(x) / c if c > 0 else 0.0


def block_length(n: int) -> int:
    """Steps per bootstrap block: n^(1/3) rounded (1 up to 3 steps, 2 up to 15, 3 up to 42,
    4 up to 91 ...)."""
    return max(1, round(n ** (1.0 / 3.0)))


def _block_resample(x: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` circular block-bootstrap replicates of ``x`` (rows), each of size n."""
    n = x.size
    b = block_length(n)
    k = -(-n // b)  # blocks per replicate
    starts = rng.integers(0, n, size=(resamples, k))
    idx = (starts[:, :, None] + np.arange(b)[None, None, :]) % n
    return x[idx.reshape(resamples, k * b)[:, :n]]


def _centers(reps: np.ndarray) -> np.ndarray:
    """The median of each replicate (no outlier rule inside the bootstrap: it is the
    spread of the median that is estimated, and outliers move a median little)."""
    return np.median(reps, axis=1)


@dataclass(frozen=True)
class NoiseTest:
    """The step-time difference of two runs against their noise (us; % of A's center)."""

    basis: str  # "gpu period" | "host step"
    n_a: int
    n_b: int
    center_a_us: float
    center_b_us: float
    spread_a_pct: float
    spread_b_pct: float
    diff_pct: float  # (B - A) / A * 100
    ci95_pct: tuple[float, float]  # bootstrap CI of diff_pct
    noise_pct: float  # max(per-step spread, CI half-width around diff_pct)
    resolved: bool  # |diff_pct| > noise_pct

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 3)
        d["ci95_pct"] = [round(x, 3) for x in self.ci95_pct]
        return d

    def sentence(self, label_a: str, label_b: str) -> str:
        """"B faster: B - A = -X us/step (-Y% of A; noise +-Z%)", or "no difference
        beyond the noise (+-Z%)"."""
        if not self.resolved:
            return f"no difference beyond the noise (±{self.noise_pct:.1f}%)"
        fast = label_b if self.diff_pct < 0 else label_a
        return (f"{fast} faster: B - A = {self.center_b_us - self.center_a_us:+,.1f} us/step "
                f"({self.diff_pct:+.1f}% of A; noise ±{self.noise_pct:.1f}%)")


def noise_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
               basis: str = "gpu period", resamples: int = RESAMPLES,
               seed: int | None = None) -> NoiseTest | None:
    """:class:`NoiseTest` of two per-step series; None when either has fewer than
    ``MIN_STEPS`` steps or a non-positive center."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size < MIN_STEPS or xb.size < MIN_STEPS:
        return None
    ca, cb = center(xa), center(xb)
    if ca <= 0 or cb <= 0:
        return None
    rng = np.random.default_rng(SEED if seed is None else seed)
    ra, rb = _centers(_block_resample(xa, rng, resamples)), _centers(
        _block_resample(xb, rng, resamples))
    rel = 100.0 * (rb - ra) / ra
    tail = (1.0 - LEVEL) / 2.0 * 100.0
    lo, hi = (float(v) for v in np.percentile(rel, [tail, 100.0 - tail]))
    diff = 100.0 * (cb - ca) / ca
    sa, sb = spread_pct(xa), spread_pct(xb)
    noise = max(sa, sb, diff - lo, hi - diff)
    return NoiseTest(basis, int(xa.size), int(xb.size), ca, cb, sa, sb, diff, (lo, hi),
                     noise, abs(diff) > noise)


def runs_noise(rep_a: Report, rep_b: Report) -> NoiseTest | None:
    """:func:`noise_test` of two reports' pipeline step series (None: too few steps, or one
    run has GPU periods and the other only host steps)."""
    xa, ba = pipeline_step_us(rep_a)
    xb, bb = pipeline_step_us(rep_b)
    if ba != bb:
        return None
    return noise_test(xa, xb, ba)


def ranks_noise(ra: RankResult, rb: RankResult) -> NoiseTest | None:
    """:func:`noise_test` of one rank in two runs."""
    xa, ba = rank_step_us(ra)
    xb, bb = rank_step_us(rb)
    return noise_test(xa, xb, ba) if ba == bb and ba else None
