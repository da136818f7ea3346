"""Is a step-time difference between two runs beyond the noise? (``compare``'s test).

The difference is that of the two steps ``compare`` prints: B - A = B's step - A's step, each
the run's step (``runstep``: the slowest rank's median step) or, per rank, that rank's step.
It is worked out in integer nanoseconds (the steps as whole ns; per-step series as whole-ns
differences of the GPU starts, never of float timestamps: at 1.7e18 ns a float64 is 256 ns
apart) and divided into us or % last.

Two traced runs give one series of per-step times each. The difference is called a
difference only when it is beyond *both*:

- the runs' **per-step spread**: the larger of the two runs' scaled MAD
  (:func:`steps.stats.scaled_mad`). Two repeats of one job differ from run to run by about as
  much as their steps differ from each other (the shipped repeats of the decode loop:
  ``benchmarks/2026-12-03/README.md``), and one run cannot measure the run-to-run part:
  ``profplug ab`` does, over rounds;
- the **bootstrap CI** of the difference of the series' centers: each run's steps resampled
  in circular blocks of :func:`block_length` consecutive steps (steps of one run are
  correlated: one warm state, one placement), ``RESAMPLES`` times, the 95% interval by order
  statistics (the 2.5% and 97.5% ranks, no interpolation), as in ``ab/stats.py``.

``noise_us`` = the larger of the two (the +- printed); ``resolved`` = ``|B - A| > noise_us``.

**The pair's property.** Nothing depends on which run is A: each run's resamples come from a
generator seeded by its own steps (the same run draws the same resamples as A or as B), the
CI's ranks mirror, and every percentage is of one base, the slower run's step. ``compare B A``
prints the same noise and the mirrored difference (docs/html-and-compare.md).

A run's series (:func:`pipeline_step_ns`): per step, the slowest rank's GPU period (first op
of a step to the first op of the next: the pipeline moves at its slowest rank's pace), the
ranks cut to the shortest; without GPU steps (a CPU run), the host step ranges' durations.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
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
SHOWN = 1  # decimals of a step in us as compare's text prints it


def ns(us: float) -> int:
    """A time in us with at most 3 decimals (the reports' figures) as whole ns."""
    return round(us * 1000.0)


def shown_diff_us(a_us: float, b_us: float, decimals: int = SHOWN) -> float:
    """B - A of the two steps as printed with ``decimals`` (us): the difference of the
    printed numbers, so that a reader's subtraction gives the printed difference."""
    def units(x: float) -> int:
        return int(Decimal(f"{x:.{decimals}f}").scaleb(decimals))
    scale: int = 10 ** decimals
    return (units(b_us) - units(a_us)) / scale


def rank_step_ns(r: RankResult) -> tuple[np.ndarray, str]:
    """One rank's per-step times (whole ns) and their basis: ``"gpu period"`` (the diff of
    the complete steps' GPU starts, in int64), else ``"host step"`` (the step ranges), else
    empty."""
    starts = np.asarray(r.step_starts_ns, dtype=np.int64)
    if starts.size >= 2:
        return np.diff(starts), "gpu period"
    if r.steps is not None and r.steps.step_us:
        return np.array([ns(x) for x in r.steps.step_us], dtype=np.int64), "host step"
    return np.zeros(0, dtype=np.int64), ""


def pipeline_step_ns(rep: Report) -> tuple[np.ndarray, str]:
    """Per step, the slowest rank's time (whole ns), and the basis (see the module
    docstring); GPU periods when every rank that has steps has them, else host steps."""
    series = [rank_step_ns(r) for r in rep.ranks]
    series = [(x, b) for x, b in series if x.size]
    if not series:
        return np.zeros(0, dtype=np.int64), ""
    gpu = [x for x, b in series if b == "gpu period"]
    use, basis = (gpu, "gpu period") if len(gpu) == len(series) else (
        [x for x, b in series if b == "host step"] or gpu,
        "host step" if any(b == "host step" for _, b in series) else "gpu period")
    n = min(x.size for x in use)
    return np.max(np.stack([x[:n] for x in use]), axis=0), basis


def pipeline_step_us(rep: Report) -> tuple[np.ndarray, str]:
    """:func:`pipeline_step_ns` in us (the division last)."""
    x, basis = pipeline_step_ns(rep)
    return x / 1000.0, basis


def spread_pct(steps: Sequence[float] | np.ndarray) -> float:
    """The per-step spread: scaled MAD / center * 100 (0 with no steps)."""
    x = np.asarray(steps, dtype=float)
    c = center(x) if x.size else 0.0
    return 100.0 * scaled_mad(x) / c if c > 0 else 0.0


def block_length(n: int) -> int:
    """Steps per bootstrap block: n^(1/3) rounded (1 up to 3 steps, 2 up to 15, 3 up to 42,
    4 up to 91 ...)."""
    cube_root: float = n ** (1.0 / 3.0)
    return max(1, round(cube_root))


def own_rng(x: np.ndarray, seed: int | None = None) -> np.random.Generator:
    """A generator seeded by the series itself (and ``SEED``): the same run draws the same
    resamples whichever side of a comparison it is on."""
    data = np.ascontiguousarray(x, dtype=np.float64).tobytes()
    return np.random.default_rng([SEED if seed is None else seed, zlib.crc32(data), x.size])


def block_medians(x: np.ndarray, rng: np.random.Generator, resamples: int = RESAMPLES
                  ) -> np.ndarray:
    """The median of each of ``resamples`` circular block-bootstrap replicates of ``x`` (no
    outlier rule inside the bootstrap: it is the spread of the median that is estimated,
    and outliers move a median little)."""
    n = x.size
    b = block_length(n)
    k = -(-n // b)  # blocks per replicate
    starts = rng.integers(0, n, size=(resamples, k))
    idx = (starts[:, :, None] + np.arange(b)[None, None, :]) % n
    medians: np.ndarray = np.median(x[idx.reshape(resamples, k * b)[:, :n]], axis=1)
    return medians


def rank_interval(d: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The ``level`` interval of ``d`` by order statistics: the values at the (1-level)/2
    ranks from either end (mirrored exactly when ``d`` is negated)."""
    s = np.sort(d)
    k = int((1.0 - level) / 2.0 * s.size)
    return float(s[k]), float(s[s.size - 1 - k])


@dataclass(frozen=True)
class NoiseTest:
    """B - A of two runs' steps against their noise (us; % of the slower run's step)."""

    basis: str  # "gpu period" | "host step"
    n_a: int
    n_b: int
    step_a_us: float  # the steps compared (the printed ones)
    step_b_us: float
    diff_us: float  # B - A, from whole ns
    slower: str  # "A" | "B" | "" (equal steps): whose step the percentages are of
    diff_pct: float  # (B - A) / the slower step * 100
    spread_a_us: float  # each run's per-step spread (scaled MAD)
    spread_b_us: float
    ci95_us: tuple[float, float]  # bootstrap CI of B - A of the series' centers
    noise_us: float  # max(per-step spreads, CI half-widths around the series' B - A)
    noise_pct: float  # noise_us / the slower step * 100
    resolved: bool  # |B - A| > noise_us

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 3)
        d["ci95_us"] = [round(x, 3) for x in self.ci95_us]
        return d

    def base(self, label_a: str, label_b: str) -> str:
        """The percentages' base in words: "device's step"."""
        return f"{label_b if self.slower == 'B' else label_a}'s step"

    def difference(self, label_a: str, label_b: str) -> str:
        """"B - A = -X us/step (-Y% of A's step; noise ±Z%)" (A's step the slower one)."""
        d = shown_diff_us(self.step_a_us, self.step_b_us)
        return (f"B - A = {d:+,.1f} us/step ({self.diff_pct:+.1f}% of "
                f"{self.base(label_a, label_b)}; noise ±{self.noise_pct:.1f}%)")

    def sentence(self, label_a: str, label_b: str) -> str:
        """"B faster: B - A = ...", or "no difference beyond the noise: B - A = ..."."""
        of = self.difference(label_a, label_b)
        if not self.resolved:
            return "no difference beyond the noise: " + of
        return f"{label_b if self.diff_us < 0 else label_a} faster: " + of


def noise_test(a_ns: Sequence[int] | np.ndarray, b_ns: Sequence[int] | np.ndarray,
               basis: str = "gpu period", steps_ns: tuple[int, int] | None = None,
               resamples: int = RESAMPLES, seed: int | None = None) -> NoiseTest | None:
    """:class:`NoiseTest` of two per-step series (whole ns); ``steps_ns``: the two steps
    compared (default: the series' centers). None when either series has fewer than
    ``MIN_STEPS`` steps or a non-positive center."""
    xa, xb = (np.asarray(x, dtype=np.int64) for x in (a_ns, b_ns))
    if xa.size < MIN_STEPS or xb.size < MIN_STEPS:
        return None
    ca, cb = center(xa), center(xb)
    if ca <= 0 or cb <= 0:
        return None
    sa, sb = (round(ca), round(cb)) if steps_ns is None else steps_ns
    if sa <= 0 or sb <= 0:
        return None
    lo, hi = rank_interval(block_medians(xb, own_rng(xb, seed), resamples)
                           - block_medians(xa, own_rng(xa, seed), resamples))
    point = cb - ca
    noise = max(scaled_mad(xa), scaled_mad(xb), point - lo, hi - point)  # ns
    diff = sb - sa  # whole ns
    slow = max(sa, sb)
    return NoiseTest(basis, int(xa.size), int(xb.size), sa / 1000.0, sb / 1000.0,
                     diff / 1000.0, "" if diff == 0 else ("A" if sa > sb else "B"),
                     100.0 * diff / slow, scaled_mad(xa) / 1000.0, scaled_mad(xb) / 1000.0,
                     (lo / 1000.0, hi / 1000.0), noise / 1000.0, 100.0 * noise / slow,
                     abs(diff) > noise)


def runs_noise(rep_a: Report, rep_b: Report, steps_us: tuple[float, float] | None = None
               ) -> NoiseTest | None:
    """:func:`noise_test` of two reports' pipeline step series and their steps (us, the
    printed ones; None: a run without GPU steps, the series' centers); None: too few steps,
    or one run has GPU periods and the other only host steps."""
    xa, ba = pipeline_step_ns(rep_a)
    xb, bb = pipeline_step_ns(rep_b)
    if ba != bb:
        return None
    steps = None if steps_us is None else (ns(steps_us[0]), ns(steps_us[1]))
    return noise_test(xa, xb, ba, steps)


def ranks_noise(ra: RankResult, rb: RankResult) -> NoiseTest | None:
    """:func:`noise_test` of one rank in two runs, against that rank's steps."""
    xa, ba = rank_step_ns(ra)
    xb, bb = rank_step_ns(rb)
    if ba != bb or not ba:
        return None
    steps = None
    if ra.steps is not None and rb.steps is not None and ra.steps.n_steps and rb.steps.n_steps:
        steps = (ns(ra.steps.period_us), ns(rb.steps.period_us))
    return noise_test(xa, xb, ba, steps)
