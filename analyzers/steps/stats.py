"""The one per-step statistic every command uses, and the outlier-step rule.

Real jobs have odd steps: one stall many times the usual step (lazy allocations, GC pauses,
barriers, a new request batch). A mean over steps then describes no step of the job, so
every per-step figure profplug prints (step time, idle per step by cause, direct/indirect
cost, saving, the what-if's recorded and predicted step, compare's deltas, ab's overhead, the
headline) is :data:`STATISTIC` over the *basis*: the steps that are not outliers. The mean
stays in the JSON, beside it, under its own name.

Outlier rule (:func:`outlier_mask`): a step is an outlier when it lies more than
:data:`OUTLIER_K` scaled MADs from the median of its rank's steps, where the scaled MAD is
``1.4826 * median(|x - median|)`` (a standard deviation's estimate that the outliers
themselves cannot inflate), floored at :data:`MAD_FLOOR` of the median, so that a run of
near-identical steps does not call a 2% slower step an outlier. Fewer than
:data:`MIN_STEPS` steps: no outliers (too few to tell). Outliers are reported, never silently
dropped.

Units: whatever the caller passes (us in reports); the functions are unit-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

STATISTIC = "median"  # the name written into the JSON beside every per-step figure
OUTLIER_K = 5.0  # scaled MADs from the median
MAD_SCALE = 1.4826  # MAD -> standard deviation of a normal distribution
MAD_FLOOR = 0.02  # the scaled MAD is at least this fraction of the median
MIN_STEPS = 5  # fewer steps: no outlier is called
SMALL = 64  # up to this many values a median sorts a Python list (numpy's per-call cost
# dominates on a rank's few dozen steps; the values are the same doubles)


def _values(values: Sequence[float] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=float).ravel()


def _median(x: np.ndarray) -> float:
    """``np.median`` of a 1-d float array, the same value (the middle one, or the mean of the
    two middle ones) from one sort: np.median's own overhead dominates on a rank's few hundred
    steps, and every per-step figure takes several."""
    n = x.size
    if 0 < n <= SMALL:  # a plain list: the same doubles, the same two-term mean
        v = sorted(x.tolist())
        total = sum(v)
        if total == total:  # no nan (with one: np.median's answer)
            k = n // 2
            return float(v[k]) if n % 2 else float((v[k - 1] + v[k]) / 2)
    if n == 0 or np.isnan(x).any():
        return float(np.median(x))
    s = np.sort(x)
    k = n // 2
    return float(s[k]) if n % 2 else float((s[k - 1] + s[k]) / 2)


def median(values: Sequence[float] | np.ndarray) -> float:
    """``np.median`` of a series (nan when empty), from one sort (:func:`_median`)."""
    return _median(_values(values))


def scaled_mad(values: Sequence[float] | np.ndarray) -> float:
    """``MAD_SCALE * median(|x - median(x)|)``, floored at ``MAD_FLOOR * |median|``."""
    x = _values(values)
    if x.size == 0:
        return 0.0
    med = _median(x)
    return max(MAD_SCALE * _median(np.abs(x - med)), MAD_FLOOR * abs(med))


def outlier_mask(values: Sequence[float] | np.ndarray, k: float = OUTLIER_K) -> np.ndarray:
    """Per value, True when it lies more than ``k`` scaled MADs from the median."""
    x = _values(values)
    if x.size < MIN_STEPS:
        return np.zeros(x.size, dtype=bool)
    med = _median(x)
    dev = np.abs(x - med)
    return dev > k * max(MAD_SCALE * _median(dev), MAD_FLOOR * abs(med))  # scaled_mad


def center(values: Sequence[float] | np.ndarray, basis: np.ndarray | None = None) -> float:
    """:data:`STATISTIC` of ``values`` over ``basis`` (a boolean mask; default: the values
    that are not outliers); 0.0 when there are none."""
    x = _values(values)
    if x.size == 0:
        return 0.0
    keep = ~outlier_mask(x) if basis is None else np.asarray(basis, dtype=bool)
    x = x[keep] if keep.any() else x
    return _median(x)


def center_rows(rows: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """:func:`center` of each row of a 2-d array over one ``basis`` mask: the same values,
    one sort for all rows (a table of per-step series, one row per cause or call site)."""
    x = np.asarray(rows, dtype=float)
    if x.ndim == 2 and 0 < x.shape[1] and x.size <= 4 * SMALL:  # few: plain lists (_median)
        keep = np.asarray(basis, dtype=bool)
        out = []
        for v in (x[:, keep] if keep.any() else x).tolist():
            total = sum(v)
            if total != total:  # a nan (or inf - inf): the array path
                break
            v.sort()
            out.append(_list_median(v))
        else:
            return np.array(out, dtype=float)
    if x.ndim != 2 or x.shape[1] == 0 or np.isnan(x).any():
        return np.array([center(r, basis) for r in x], dtype=float)
    keep = np.asarray(basis, dtype=bool)
    x = x[:, keep] if keep.any() else x
    s = np.sort(x, axis=1)
    k = s.shape[1] // 2
    return s[:, k].copy() if s.shape[1] % 2 else (s[:, k - 1] + s[:, k]) / 2


@dataclass(frozen=True)
class StepSummary:
    """One series of per-step values: its :data:`STATISTIC` over the basis, the plain mean
    over every step, and which steps are outliers (indices into the series)."""

    value: float  # STATISTIC over the basis (the non-outlier steps)
    mean: float  # over all steps, outliers included
    n: int
    outliers: list[int] = field(default_factory=list)
    statistic: str = STATISTIC

    def to_dict(self, digits: int = 3) -> dict[str, object]:
        return {"statistic": self.statistic, "value": round(self.value, digits),
                "mean": round(self.mean, digits), "n": self.n, "outliers": self.outliers}


def _list_median(v: list[float]) -> float:
    """The median of a sorted, nan-free list (as :func:`_median`)."""
    k = len(v) // 2
    return float(v[k]) if len(v) % 2 else float((v[k - 1] + v[k]) / 2)


def _summarize_list(x: np.ndarray) -> StepSummary | None:
    """:func:`summarize` of at most :data:`SMALL` values in plain lists (the same doubles
    and comparisons as the array path: the same answer); None when a value is nan."""
    xs = x.tolist()
    total = sum(xs)
    if total != total:
        return None
    med = _list_median(sorted(xs))
    out: list[int] = []
    keep = xs
    if len(xs) >= MIN_STEPS:  # outlier_mask
        dev = [abs(v - med) for v in xs]
        lim = OUTLIER_K * max(MAD_SCALE * _list_median(sorted(dev)), MAD_FLOOR * abs(med))
        out = [i for i, d in enumerate(dev) if d > lim]
        if out and len(out) < len(xs):  # center() over the basis (all when none is left)
            keep = [v for v, d in zip(xs, dev, strict=True) if not d > lim]
    value = med if keep is xs else _list_median(sorted(keep))
    return StepSummary(value, float(np.add.reduce(x) / x.size), len(xs), out)  # x.mean()


def summarize(values: Sequence[float] | np.ndarray) -> StepSummary:
    """:class:`StepSummary` of a series (empty: zeros)."""
    x = _values(values)
    if x.size == 0:
        return StepSummary(0.0, 0.0, 0)
    if x.size <= SMALL:
        got = _summarize_list(x)
        if got is not None:
            return got
    out = outlier_mask(x)
    return StepSummary(center(x, ~out), float(x.mean()), int(x.size),
                       np.flatnonzero(out).tolist())
