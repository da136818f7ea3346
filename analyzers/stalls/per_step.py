"""Per-step view: step time and idle by cause per step (times in us).

A step is a host range (``ProfilerStep#N`` or ``profplug.step``). Its GPU span runs from the
first GPU op it launched (matched by correlation id) to the first op the next step
launched; the last step's span ends when its last op ends. A step that launched no GPU work
is incomplete and dropped (say, the profiler stopped inside it). Each idle gap belongs to
the step whose span holds the gap's start.

The per-step series is each step's own GPU period (``period_us_per_step``: first op of a step
to the first op of the next; the last step has no successor, so with >= 2 steps it is left
out of the series) and each step's own idle by cause. The step time every command prints is
:data:`steps.stats.STATISTIC` of that series over its basis, the steps that are not outliers
(``period_us``; ``steps.stats``): equal on every rank of a pipeline, unlike the host range
(``step_us_mean``), which is shorter on a rank whose host runs ahead of its GPU. Idle between
groups of steps (a server between requests) lands in the period of the last step before it;
such steps are outliers, listed (``outliers``), not the job's step. ``idle_per_step_us`` is
the same statistic of each cause's per-step idle over the same basis (the causes' medians
need not add up to the step's); the means stay beside them (``*_mean``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TypedDict

import numpy as np
from profplug.analyzers.core.timeline import Timeline, launch_times, launch_tops
from profplug.analyzers.stalls.gaps import Gaps
from profplug.analyzers.steps.stats import STATISTIC, StepSummary, center_rows, median, summarize

I64_MAX, I64_MIN = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)


class OutlierStep(TypedDict):
    """One outlier step described (``stalls.outliers``)."""

    step: int  # the trace's step number
    step_us: float
    dominant: str  # the largest part of the step, in words
    dominant_cause: str  # "busy" or one of gaps.CAUSES
    dominant_us: float
    callsite: str | None
    peer: int | None  # the rank its synchronize waited on


@dataclass
class StepStats:
    n_steps: int  # complete steps
    n_dropped: int  # incomplete steps left out
    step_us_mean: float  # host duration of a step range
    step_us_p50: float
    step_us: list[float]  # per complete step
    step_numbers: list[int]
    idle_per_step_us: dict[str, float]  # STATISTIC over the basis of each cause's idle
    gpu_span_us_mean: float  # mean GPU span of a step (the last one ends at its last op)
    period_us: float  # STATISTIC over the basis of the per-step period: THE step time
    statistic: str = STATISTIC
    period_us_mean: float = 0.0  # the plain mean over every step of the series
    idle_per_step_us_mean: dict[str, float] = field(default_factory=dict)  # per step, mean
    period_us_per_step: list[float] = field(default_factory=list)  # the series
    outlier_steps: list[int] = field(default_factory=list)  # indices into the series
    # (internal: the JSON gives the trace's step numbers, :meth:`json_dict`)
    outliers: list[OutlierStep] = field(default_factory=list)  # described (outliers.py)
    # the time outlier steps slower than the step time add beyond it: a pause between groups
    # of steps (a server between requests), a slow first step; not step time (docs/costs.md)
    between_steps_idle_us: float = 0.0

    def basis(self) -> np.ndarray:
        """Per step of the series, True when it is in the basis (not an outlier)."""
        keep = np.ones(len(self.period_us_per_step), dtype=bool)
        keep[self.outlier_steps] = False
        return keep

    def number(self, i: int) -> int:
        """The trace's number of step ``i`` of the series (``ProfilerStep#N``'s N); its index
        when the step numbers were not kept (a brief analysis)."""
        return int(self.step_numbers[i]) if i < len(self.step_numbers) else int(i)

    def json_dict(self) -> dict[str, object]:
        """The JSON object: every step named by the trace's step number (``outlier_steps``
        too, as ``outliers[].step`` and ``step_numbers``); the series stay in step order."""
        d = asdict(self)
        d["outlier_steps"] = [self.number(i) for i in self.outlier_steps]
        return d


@dataclass
class StepSpans:
    """The GPU span of every complete step (ns, sorted by start): ``span_s`` = first op the
    step launched, ``span_e`` = the next complete step's first op (the last one: its last
    op's end). ``rows``: the steps' rows in ``tl.step_*``; ``n_ranges``: all step ranges;
    ``op_step``: per GPU op, the complete step (index into the spans) that launched it, -1;
    ``last_e``: the end of the last-ending op each complete step launched."""

    span_s: np.ndarray
    span_e: np.ndarray
    rows: np.ndarray
    n_ranges: int
    op_step: np.ndarray
    last_e: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _extrema_at(first: np.ndarray, last: np.ndarray, key: np.ndarray, lo: np.ndarray,
                hi: np.ndarray) -> None:
    """``np.minimum.at(first, key, lo)`` and ``np.maximum.at(last, key, hi)``; by one
    ``reduceat`` per run of equal keys when ``key`` does not decrease (the usual: ops in
    launch order), the same values."""
    if key.size < 2048 or not (key[1:] >= key[:-1]).all():  # few: .at is as fast
        np.minimum.at(first, key, lo)
        np.maximum.at(last, key, hi)
        return
    at = np.flatnonzero(key[1:] != key[:-1]) + 1
    at = np.concatenate([[0], at]) if at.size else np.zeros(1, dtype=np.int64)
    k = key[at]
    first[k] = np.minimum(first[k], np.minimum.reduceat(lo, at))
    last[k] = np.maximum(last[k], np.maximum.reduceat(hi, at))


def step_spans(tl: Timeline, launch: np.ndarray | None = None) -> StepSpans:
    """The complete steps' GPU spans (see the module docstring); ``launch``: the ops'
    launch times (their top-level calls' starts) when the caller has them."""
    z = np.zeros(0, dtype=np.int64)
    order = np.argsort(tl.step_start_ns, kind="stable")
    st_s, st_e = tl.step_start_ns[order], tl.step_end_ns[order]
    n = st_s.size
    none = np.full(tl.n_gpu, -1, dtype=np.int64)
    if n == 0 or tl.n_gpu == 0:
        return StepSpans(z, z, z, int(n), none)
    launch = launch_times(tl, launch_tops(tl)) if launch is None else launch
    step_of_op = np.searchsorted(st_s, launch, side="right") - 1
    inside = (step_of_op >= 0) & (launch <= st_e[np.maximum(step_of_op, 0)])
    first = np.full(n, I64_MAX, dtype=np.int64)
    last = np.full(n, I64_MIN, dtype=np.int64)
    op_step = step_of_op[inside]
    _extrema_at(first, last, op_step, tl.gpu_start_ns[inside], tl.gpu_end_ns[inside])
    idx = np.nonzero(first < I64_MAX)[0]
    if idx.size == 0:
        return StepSpans(z, z, z, int(n), none)
    span_s = first[idx]
    last_e = last[idx]
    span_e = np.empty_like(span_s)  # the next step's first op; the last: its last op's end
    span_e[:-1], span_e[-1] = span_s[1:], last_e[-1]
    np.maximum(span_e, span_s, out=span_e)
    pos = np.full(n, -1, dtype=np.int64)
    pos[idx] = np.arange(idx.size)
    none[inside] = pos[op_step]
    return StepSpans(span_s, span_e, order[idx], int(n), none, last_e)


def series_len(n_steps: int) -> int:
    """How many complete steps the per-step series holds: all but the last from 2 on."""
    return n_steps - 1 if n_steps >= 2 else n_steps


def gap_steps(span_s: np.ndarray, span_e: np.ndarray, gap_start_ns: np.ndarray) -> np.ndarray:
    """Per gap, the index of the step span holding its start, -1 for none."""
    k = span_s.searchsorted(gap_start_ns, side="right")
    k -= 1
    if not span_s.size:
        return k  # every gap: -1
    k[gap_start_ns >= span_e[np.maximum(k, 0)]] = -1  # k = -1 stays -1
    return k


def per_step_ns(span_s: np.ndarray, span_e: np.ndarray, gap_start_ns: np.ndarray,
                values_ns: np.ndarray) -> np.ndarray:
    """Per complete step of the series (:func:`series_len`), the sum of ``values_ns`` of the
    gaps that start in it (ns)."""
    n = series_len(int(span_s.size))
    k = gap_steps(span_s, span_e, gap_start_ns)
    sel = (k >= 0) & (k < n)
    return _sum_at(k[sel], values_ns[sel], n)


def _sum_at(key: np.ndarray, values_ns: np.ndarray, n: int) -> np.ndarray:
    """Per key 0 .. n-1 the sum of its ``values_ns`` (int64): ``np.add.at``'s sums, by one
    bincount where its float sums are exact (every partial sum below 2^52 ns)."""
    if values_ns.size == 0 or float(np.abs(values_ns).sum(dtype=np.float64)) >= 2.0 ** 52:
        out = np.zeros(n, dtype=np.int64)
        np.add.at(out, key, values_ns)
        return out
    return np.bincount(key, values_ns, minlength=n)[:n].astype(np.int64)


def center_by_key(span_s: np.ndarray, span_e: np.ndarray, gap_start_ns: np.ndarray,
                  values_ns: np.ndarray, key: np.ndarray, n_keys: int, basis: np.ndarray,
                  k: np.ndarray | None = None) -> np.ndarray:
    """Per key (0 .. n_keys-1; a gap's key -1: none), :data:`steps.stats.STATISTIC` over the
    ``basis`` steps of the per-step sum of ``values_ns`` of its gaps (us); ``k``: the gaps'
    :func:`gap_steps` when the caller has them."""
    n = series_len(int(span_s.size))
    k = gap_steps(span_s, span_e, gap_start_ns) if k is None else k
    sel = (k >= 0) & (k < n) & (key >= 0)
    table = _sum_at(key[sel] * n + k[sel], values_ns[sel], n_keys * n).reshape(n_keys, n)
    return center_rows(table / 1000.0, basis)


def step_time(tl: Timeline, gaps: Gaps, causes: Sequence[str], *,
              launch: np.ndarray | None = None) -> tuple[StepStats | None, StepSpans | None]:
    """The complete steps' spans (:func:`step_spans`; ``launch`` as there) and the figures
    that every analysis reads of them: the step time (us), its outliers and series, the idle
    per step by cause, the mean GPU span. The host ranges' figures, the step numbers and the
    means stay empty (:func:`step_detail` adds them). None, None: no step ranges or no GPU
    work."""
    if tl.step_start_ns.size == 0 or tl.n_gpu == 0:
        return None, None
    sp = step_spans(tl, launch)
    if sp.rows.size == 0:
        return (StepStats(0, int(sp.n_ranges), 0.0, 0.0, [], [], {c: 0.0 for c in causes}, 0.0,
                          0.0, idle_per_step_us_mean={c: 0.0 for c in causes}), sp)
    span_s, span_e = sp.span_s, sp.span_e
    period = (span_s[1:] - span_s[:-1] if span_s.size >= 2 else span_e - span_s).astype(np.float64)
    period_us = period / 1000.0
    summary = summarize(period_us)
    basis = np.ones(period.size, dtype=bool)
    basis[summary.outliers] = False
    # every cause at once: its idle summed over the complete steps, and its per-step series'
    # statistic (center_by_key: one table, one median per cause)
    med = center_by_key(span_s, span_e, gaps.start_ns, gaps.end_ns - gaps.start_ns,
                        gaps.cause.astype(np.int64), len(causes), basis)
    span = span_e - span_s  # its mean: np.mean's float64 sum over the count
    return StepStats(
        n_steps=int(sp.rows.size), n_dropped=int(sp.n_ranges - sp.rows.size), step_us_mean=0.0,
        step_us_p50=0.0, step_us=[], step_numbers=[],
        idle_per_step_us={c: round(float(med[ci]), 3) for ci, c in enumerate(causes)},
        gpu_span_us_mean=round(float(np.add.reduce(span, dtype=np.float64) / span.size) / 1000.0,
                               3),
        period_us=round(summary.value, 3), period_us_per_step=_series_us(period, period_us),
        outlier_steps=list(summary.outliers),
        between_steps_idle_us=between_steps_us(period_us, summary)), sp


def _series_us(period: np.ndarray, period_us: np.ndarray) -> list[float]:
    """The periods (ns, whole) in us, rounded to 3 decimals: ``period_us`` as it is below
    2^40 ns (x / 1000 of a whole x is then already the double round(x / 1000, 3) gives);
    past that (18 min), each rounded."""
    if period_us.size == 0 or float(np.abs(period).max()) < 2.0 ** 40:
        exact: list[float] = period_us.tolist()
        return exact
    return [round(x / 1000.0, 3) for x in period.tolist()]


def step_detail(stats: StepStats, tl: Timeline, gaps: Gaps, sp: StepSpans,
                causes: Sequence[str]) -> StepStats:
    """``stats`` (:func:`step_time`'s, over ``sp``) with the figures the report adds: the
    step ranges' host durations (us: mean, median, each), the trace's step numbers, the mean
    period and the mean idle per step by cause (us)."""
    rows = sp.rows
    if rows.size == 0:
        return stats
    in_step = gap_steps(sp.span_s, sp.span_e, gaps.start_ns) >= 0
    total = np.zeros(len(causes), dtype=np.int64)
    np.add.at(total, gaps.cause[in_step], (gaps.end_ns - gaps.start_ns)[in_step])
    step_ns = (tl.step_end_ns - tl.step_start_ns)[rows]
    return replace(
        stats, step_us_mean=round(float(step_ns.mean()) / 1000.0, 3),
        step_us_p50=round(median(step_ns.astype(np.float64)) / 1000.0, 3),
        step_us=[round(x / 1000.0, 3) for x in step_ns.tolist()],  # plain floats: the same
        step_numbers=tl.step_num[rows].astype(np.int64).tolist(),
        period_us_mean=round(_period_ns(sp.span_s, sp.span_e) / 1000.0, 3),
        idle_per_step_us_mean={c: round(float(total[ci]) / 1000.0 / rows.size, 3)
                               for ci, c in enumerate(causes)})


def between_steps_us(period_us: np.ndarray, summary: StepSummary) -> float:
    """Idle between groups of steps: over the outlier steps slower than the step time (the
    statistic), the sum of their periods' excess over it (us)."""
    if not summary.outliers:
        return 0.0
    excess = period_us[summary.outliers] - summary.value
    return round(float(excess[excess > 0].sum()), 3)


def _period_ns(span_s: np.ndarray, span_e: np.ndarray) -> float:
    """Mean step period on the GPU: first-op to next step's first-op (the last step has no
    successor, so with >= 2 steps it is left out); one step: its own span."""
    if span_s.size >= 2:
        return float(np.diff(span_s).mean())
    return float((span_e - span_s).mean())
