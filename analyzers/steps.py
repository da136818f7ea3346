"""Per-step view: step time and idle by cause per step (times in us).

A step is a host range (``ProfilerStep#N`` or ``profplug.step``). Its GPU span runs from the
first GPU op it launched (matched by correlation id) to the first op the next step
launched; the last step's span ends when its last op ends. A step that launched no GPU work
is incomplete and dropped (say, the profiler stopped inside it). Each idle gap belongs to
the step whose span holds the gap's start. The step time reports compare is the mean GPU
period (``period_us``: first op of a step to the first op of the next): equal on every rank of a pipeline, unlike the host range
(``step_us_mean``), which is shorter on a rank whose host runs ahead of its GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .gaps import Gaps
from .timeline import Timeline, launch_times, launch_tops

if TYPE_CHECKING:
    from .gaps import DeviceIntervals


@dataclass
class StepStats:
    n_steps: int  # complete steps
    n_dropped: int  # incomplete steps left out
    step_us_mean: float  # host duration of a step range
    step_us_p50: float
    step_us: list[float]  # per complete step
    step_numbers: list[int]
    idle_per_step_us: dict[str, float]  # mean idle per complete step, by cause
    gpu_span_us_mean: float  # mean GPU span of a step (the last one ends at its last op)
    period_us: float  # mean step period on the GPU: the step time reports compare


@dataclass
class StepSpans:
    """The GPU span of every complete step (ns, sorted by start): ``span_s`` = first op the
    step launched, ``span_e`` = the next complete step's first op (the last one: its last
    op's end). ``rows``: the steps' rows in ``tl.step_*``; ``n_ranges``: all step ranges;
    ``op_step``: per GPU op, the complete step (index into the spans) that launched it, -1."""

    span_s: np.ndarray
    span_e: np.ndarray
    rows: np.ndarray
    n_ranges: int
    op_step: np.ndarray


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
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, step_of_op[inside], tl.gpu_start_ns[inside])
    np.maximum.at(last, step_of_op[inside], tl.gpu_end_ns[inside])
    idx = np.nonzero(first < np.iinfo(np.int64).max)[0]
    if idx.size == 0:
        return StepSpans(z, z, z, int(n), none)
    span_s = first[idx]
    span_e = np.maximum(np.append(first[idx][1:], last[idx][-1]), span_s)
    pos = np.full(n, -1, dtype=np.int64)
    pos[idx] = np.arange(idx.size)
    none[inside] = pos[step_of_op[inside]]
    return StepSpans(span_s, span_e, order[idx], int(n), none)


def step_stats(tl: Timeline, gaps: Gaps, intervals: dict[int, DeviceIntervals],
               causes: Sequence[str]) -> StepStats | None:
    return step_stats_and_starts(tl, gaps, intervals, causes)[0]


def step_stats_and_starts(tl: Timeline, gaps: Gaps, intervals: dict[int, DeviceIntervals],
                          causes: Sequence[str]) -> tuple[StepStats | None, np.ndarray]:
    """:func:`step_stats`, and the GPU start (first op, ns) of each complete step."""
    none = np.zeros(0, dtype=np.int64)
    if tl.step_start_ns.size == 0 or tl.n_gpu == 0:
        return None, none
    sp = step_spans(tl)
    n = sp.n_ranges
    if sp.rows.size == 0:
        return StepStats(0, int(n), 0.0, 0.0, [], [], {c: 0.0 for c in causes}, 0.0, 0.0), none
    span_s, span_e, rows = sp.span_s, sp.span_e, sp.rows
    gs = gaps.start_ns
    k = np.searchsorted(span_s, gs, side="right") - 1
    in_step = (k >= 0) & (gs < span_e[np.maximum(k, 0)])
    dur = gaps.end_ns - gaps.start_ns
    per_cause = {}
    for ci, c in enumerate(causes):
        sel = in_step & (gaps.cause == ci)
        per_cause[c] = round(float(dur[sel].sum()) / 1000.0 / rows.size, 3)
    step_ns = (tl.step_end_ns - tl.step_start_ns)[rows]
    return StepStats(
        n_steps=int(rows.size), n_dropped=int(n - rows.size),
        step_us_mean=round(float(step_ns.mean()) / 1000.0, 3),
        step_us_p50=round(float(np.median(step_ns)) / 1000.0, 3),
        step_us=[round(float(x) / 1000.0, 3) for x in step_ns],
        step_numbers=[int(x) for x in tl.step_num[rows]],
        idle_per_step_us=per_cause,
        gpu_span_us_mean=round(float((span_e - span_s).mean()) / 1000.0, 3),
        period_us=round(_period_ns(span_s, span_e) / 1000.0, 3)), span_s


def _period_ns(span_s: np.ndarray, span_e: np.ndarray) -> float:
    """Mean step period on the GPU: first-op to next step's first-op (the last step has no
    successor, so with >= 2 steps it is left out); one step: its own span."""
    if span_s.size >= 2:
        return float(np.diff(span_s).mean())
    return float((span_e - span_s).mean())
