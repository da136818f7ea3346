"""The swimlane's rows, one per rank, made where the rank is read (``swimlane`` joins them).

The swimlane draws every GPU op, idle gap and launch-queue point of a few steps: its window
is ``n`` consecutive steps from the middle of the critical path's walks (``LaneAsk``: the
candidate windows, ``n`` = 3, 2, 1 steps, aligned ns), the widest whose ops the page can
draw (``max_ops`` over all ranks). A rank's :class:`LaneRow` counts its GPU ops in each
candidate and holds what lies in the widest candidate with at most ``max_ops`` ops of its
own (and in every narrower one): the window the client picks from the counts is one of
those, and the client cuts the rows to it. So the rows are the same whether they are made in
this process or on the workers (docs/scale.md), and none holds more than the widest window
its rank could draw alone (at most ``LANE_STEPS`` steps of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank.bubbles import RankBubbles
from profplug.analyzers.crossrank.drain import Queue
from profplug.analyzers.stalls.gaps import Gaps

LANE_STEPS = 3  # the swimlane draws this many steps, fewer when their ops pass MAX_OPS
MAX_OPS = 40_000  # GPU ops of all ranks in the window


@dataclass(frozen=True)
class LaneAsk:
    """The candidate windows [lo, hi) (aligned ns), widest first, and the page's op budget."""

    windows: tuple[tuple[int, int], ...]
    max_ops: int


def lane_ask(bounds: list[tuple[int, int]], steps: int = LANE_STEPS,
             max_ops: int | None = None) -> LaneAsk | None:
    """The candidates from the walks' step bounds (``StepPath.lo_ns``/``hi_ns``, in walk
    order): ``n`` = ``steps`` .. 1 steps from the middle, each ending where the next step
    starts (the last step: at its end); None without a walk. ``max_ops``: default
    ``MAX_OPS``."""
    if not bounds:
        return None
    out = []
    for n in range(min(steps, len(bounds)), 0, -1):
        first = max(0, (len(bounds) - n) // 2)
        lo = bounds[first][0]
        hi = bounds[first + n][0] if first + n < len(bounds) else bounds[first + n - 1][1]
        out.append((lo, hi))
    return LaneAsk(tuple(out), MAX_OPS if max_ops is None else max_ops)


@dataclass
class LaneRow:
    """One rank's part of the swimlane, aligned ns. ``counts``: its GPU ops in each candidate
    window; [lo, hi): the span it holds (the widest candidate it could draw and every
    narrower one). Its GPU ops that overlap the span, in timeline order: start, end, where a
    NCCL kernel's wait ends (its start for the other ops), NCCL kernel or not, without
    partner or not; its idle gaps that overlap the span (start, end, cause), in gap order;
    its launch-queue points in the span (time, depth); the depth at each candidate's start."""

    counts: np.ndarray
    lo: int
    hi: int
    op_s: np.ndarray
    op_e: np.ndarray
    op_w: np.ndarray
    op_comm: np.ndarray
    op_unmatched: np.ndarray
    gap_s: np.ndarray
    gap_e: np.ndarray
    gap_cause: np.ndarray
    q_t: np.ndarray
    q_depth: np.ndarray
    start_depth: np.ndarray


def lane_span(tl: Timeline, offset: int, ask: LaneAsk) -> tuple[np.ndarray, int, int]:
    """The rank's GPU ops per candidate window, and the span its row holds (see
    :class:`LaneRow`)."""
    s, e = tl.gpu_start_ns + offset, tl.gpu_end_ns + offset
    counts = np.array([int(((e > lo) & (s < hi)).sum()) for lo, hi in ask.windows],
                      dtype=np.int64)
    fits = np.nonzero(counts <= ask.max_ops)[0]
    k = int(fits[0]) if fits.size else len(ask.windows) - 1
    held = ask.windows[k:]
    return counts, min(lo for lo, _ in held), max(hi for _, hi in held)


def gaps_in(g: Gaps, offset: int, lo: int, hi: int) -> tuple[np.ndarray, ...]:
    """The gaps of ``g`` that overlap [lo, hi) (aligned ns): start, end (aligned), cause."""
    gs, ge = g.start_ns + offset, g.end_ns + offset
    sel = (ge > lo) & (gs < hi)
    return gs[sel], ge[sel], g.cause[sel]


def lane_row(tl: Timeline, offset: int, bubbles: RankBubbles, gaps: tuple[np.ndarray, ...],
             queue: Queue, ask: LaneAsk, span: tuple[np.ndarray, int, int]) -> LaneRow:
    """The rank's :class:`LaneRow`; ``span``: :func:`lane_span`'s, ``gaps``: its
    :func:`gaps_in` that span."""
    counts, lo, hi = span
    s, e = tl.gpu_start_ns + offset, tl.gpu_end_ns + offset
    ops = np.nonzero((e > lo) & (s < hi))[0]
    comm = np.zeros(tl.n_gpu, dtype=bool)
    comm[bubbles.kernels] = True
    unmatched = np.zeros(tl.n_gpu, dtype=bool)
    unmatched[bubbles.kernels] = ~bubbles.matched
    w = s.copy()
    w[bubbles.kernels] = bubbles.wait_end + offset
    qt = queue.t + offset
    qs = (qt >= lo) & (qt < hi)
    starts = np.array([lo_k - offset for lo_k, _ in ask.windows], dtype=np.int64)
    gap_s, gap_e, gap_cause = gaps
    return LaneRow(counts, lo, hi, s[ops], e[ops], w[ops], comm[ops], unmatched[ops],
                   gap_s, gap_e, gap_cause, qt[qs], queue.depth[qs], queue.at(starts))
