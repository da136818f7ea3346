"""One rank's what-if figures (:class:`~.result.RankWhatIf`) from its recorded run and the
two replays of the run (as recorded; without the dropped calls).

Three steps, so that each input can go before the next is made (a worker's peak memory:
docs/scale.md):

1. :func:`recorded_side`: the recorded run's figures, from its stall analysis, before any
   replay exists: the basis (``Basis.STEP`` when the run has steps, else ``Basis.WINDOW``: the GPU
   window), the recorded step time, the GPU idle charged to the dropped calls (direct).
2. :func:`with_replayed_time`: the replay as recorded, read as a step time (the model's own
   error against the recorded one).
3. :func:`predict_rank`: the replay without the dropped calls, as a timeline, its brief stall
   analysis, and the rank's figures.

Step figures are read as the report reads them (``step_figures``). Times in ns until the
result, which holds us (:data:`NS_PER_US`) and percentages of the recorded time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.graph.model import Model
from profplug.analyzers.stalls.gaps import CAUSES, NO_GAPS
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank
from profplug.analyzers.whatif import step_figures
from profplug.analyzers.whatif.bound import host_cadence_us
from profplug.analyzers.whatif.model_links import recorded_links, replayed_links
from profplug.analyzers.whatif.predicted_timeline import (
    kept_calls,
    predicted_timeline,
    replayed_timeline,
)
from profplug.analyzers.whatif.result import RankWhatIf
from profplug.analyzers.whatif.simulate import Replay

NS_PER_US = 1000.0


@dataclass(frozen=True)
class RecordedSide:
    """A rank's recorded run as the what-if reads it (step 1 of the module docstring)."""

    stalls: RankResult  # its stall analysis, without its gaps (read: the steps)
    basis: Basis  # STEP: per step; WINDOW: the GPU window
    n_steps: int  # the steps of the basis; 0 for WINDOW
    recorded_ns: float  # the step time (or the window)
    direct_ns: float  # GPU idle in gaps that started inside a dropped call, per step
    idle_by_cause_us: dict[str, float]  # per step (or in the window), by cause

    @property
    def per_step(self) -> bool:
        """Whether the figures are per step (the basis ``"step"``), not the GPU window's."""
        return self.basis == Basis.STEP


@dataclass(frozen=True)
class ReplayedSide:
    """The recorded side and the step time of the replay as recorded (step 2)."""

    recorded: RecordedSide
    replayed_ns: float


class RankPrediction(NamedTuple):
    """A rank's figures and its predicted timeline (the replay's own times, as its figures
    read them: ``WhatIfResult.predicted``)."""

    figures: RankWhatIf
    timeline: Timeline


def brief_stalls(tl: Timeline, model: Model, options: StallOptions) -> RankResult:
    """The recorded rank's brief stall analysis (no call sites, sync statistics or outlier
    texts: its figures read only its gaps, steps and sync rows), with the model's kinds and
    launches (the analysis's own)."""
    links = recorded_links(model, tl.rank)
    return analyze_rank(tl, options, brief=True, api_kind=links.api_kind, launch=links.launch_ns)


def recorded_side(tl: Timeline, model: Model, stalls: RankResult) -> RecordedSide:
    """Step 1: the recorded figures of a rank from its stall analysis ``stalls``."""
    has_steps = stalls.steps is not None and stalls.steps.n_steps > 0
    basis = Basis.STEP if has_steps else Basis.WINDOW
    return RecordedSide(
        stalls=replace(stalls, gaps=NO_GAPS),
        basis=basis,
        n_steps=stalls.steps.n_steps if stalls.steps is not None and has_steps else 0,
        recorded_ns=step_figures.step_ns(stalls, basis),
        direct_ns=_direct_ns(tl, model, stalls, basis),
        idle_by_cause_us=_idle_by_cause_us(stalls, has_steps),
    )


def _direct_ns(tl: Timeline, model: Model, stalls: RankResult, basis: Basis) -> float:
    """GPU idle (per step, or in the window) in the gaps the stall analysis charged to a call
    the replay drops, each call's share at most the time it blocked the host."""
    call_first, _ = model.rank_a[tl.rank]
    sync_rows = stalls.call_row  # the sync calls' rows in the timeline
    sync_dropped = model.a_dropped[call_first + sync_rows]
    gaps = stalls.gaps
    charged = gaps.call >= 0
    charged[charged] = sync_dropped[gaps.call[charged]]
    blocked_ns = tl.api_end_ns[sync_rows] - tl.api_start_ns[sync_rows]
    return step_figures.direct_ns(stalls, basis, charged, blocked_ns)


def _idle_by_cause_us(stalls: RankResult, per_step: bool) -> dict[str, float]:
    """GPU idle by cause: per step (``per_step``, when the analysis has steps), else in the
    window; us, 3 decimals."""
    if per_step and stalls.steps is not None and stalls.steps.n_steps:
        return {c: round(stalls.steps.idle_per_step_us.get(c, 0.0), 3) for c in CAUSES}
    return {c: round(v, 3) for c, v in stalls.idle_by_cause_us().items()}


def with_replayed_time(
    tl: Timeline, model: Model, recorded_replay: Replay, side: RecordedSide
) -> ReplayedSide:
    """Step 2: ``side`` with the step time of ``recorded_replay`` (the replay as recorded):
    the recorded step when the replay reproduced the rank, else read from its steps."""
    if side.per_step and _reproduced(model, recorded_replay, tl.rank):
        replayed_ns = side.recorded_ns
    else:
        replayed_ns = step_figures.replayed_ns(
            replayed_timeline(tl, model, recorded_replay), side.basis, side.stalls
        )
    return ReplayedSide(side, replayed_ns)


def _reproduced(model: Model, replay: Replay, rank: int) -> bool:
    """Every op and call of the rank at its recorded time in ``replay``."""
    call_first, call_end = model.rank_a[rank]
    op_first, op_end = model.rank_o[rank]
    return all(
        bool((replayed[first:end] == recorded[first:end]).all())
        for replayed, recorded, first, end in (
            (replay.o_start, model.o_start, op_first, op_end),
            (replay.o_end, model.o_end, op_first, op_end),
            (replay.a_start, model.a_start, call_first, call_end),
            (replay.a_end, model.a_end, call_first, call_end),
        )
    )


def predict_rank(
    tl: Timeline,
    model: Model,
    replayed: ReplayedSide,
    dropped_replay: Replay,
    options: StallOptions,
) -> RankPrediction:
    """Step 3: the rank's figures from its replayed side and ``dropped_replay`` (the replay
    without the dropped calls), whose timeline gets the brief stall analysis."""
    recorded = replayed.recorded
    kept = kept_calls(model, tl.rank)
    links = replayed_links(model, dropped_replay, tl.rank, kept)
    timeline = predicted_timeline(tl, model, dropped_replay, kept)
    stalls = analyze_rank(
        timeline,
        options,
        brief=True,
        api_kind=None if links is None else links.api_kind,
        launch=None if links is None else links.launch_ns,
    )
    cadence_us = host_cadence_us(timeline, recorded.stalls) if recorded.per_step else 0.0
    predicted_ns = step_figures.step_ns(stalls, recorded.basis, recorded.stalls)
    figures = _rank_figures(tl.rank, model, replayed, predicted_ns, stalls, cadence_us)
    return RankPrediction(figures, timeline)


def _pct(part: float, whole: float) -> float:
    """``part`` in % of ``whole``, 2 decimals; 0.0 when ``whole`` is 0."""
    return round(100.0 * part / whole, 2) if whole else 0.0


def _rank_figures(
    rank: int,
    model: Model,
    replayed: ReplayedSide,
    predicted_ns: float,
    predicted_stalls: RankResult,
    cadence_us: float,
) -> RankWhatIf:
    """The rank's :class:`RankWhatIf` (saving = recorded - predicted; indirect = saving -
    direct; docs/costs.md)."""
    recorded = replayed.recorded
    recorded_ns, replayed_ns, direct_ns = (
        recorded.recorded_ns,
        replayed.replayed_ns,
        recorded.direct_ns,
    )
    saving_ns = recorded_ns - predicted_ns
    steps = recorded.stalls.steps
    call_first, call_end = model.rank_a[rank]
    return RankWhatIf(
        rank=rank,
        basis=recorded.basis,
        n_steps=recorded.n_steps,
        recorded_us=round(recorded_ns / NS_PER_US, 3),
        replayed_us=round(replayed_ns / NS_PER_US, 3),
        model_error_pct=_pct(replayed_ns - recorded_ns, recorded_ns),
        predicted_us=round(predicted_ns / NS_PER_US, 3),
        saving_us=round(saving_ns / NS_PER_US, 3),
        saving_pct=_pct(saving_ns, recorded_ns),
        direct_us=round(direct_ns / NS_PER_US, 3),
        indirect_us=round((saving_ns - direct_ns) / NS_PER_US, 3),
        dropped_calls=int(np.count_nonzero(model.a_dropped[call_first:call_end])),
        recorded_idle_by_cause_us=recorded.idle_by_cause_us,
        predicted_idle_by_cause_us=_idle_by_cause_us(predicted_stalls, recorded.per_step),
        between_steps_idle_us=steps.between_steps_idle_us
        if recorded.per_step and steps is not None
        else 0.0,
        host_cadence_us=cadence_us,
    )
