"""The what-if as a run-level analysis of a report: its spec, made here only
(:func:`whatif_analysis`: forced, or the report's default that runs when cheap), and its
rounds where the ranks are read (:class:`WhatIfRounds`, the steps of ``whatif.rounds``:
reductions, the client's solve, each rank's result, the join)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core.analysis_spec import (
    AnalysisSpec,
    Asks,
    Done,
    FirstPart,
    NeedsTimelines,
    Next,
)
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.optional import Ok, Outcome, TaskError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.commview import CommView
from profplug.analyzers.graph.dropat import site_counts
from profplug.analyzers.graph.model import DropSpec
from profplug.analyzers.graph.run_views import RunViews
from profplug.analyzers.stalls.rank import RankResult, StallOptions
from profplug.analyzers.whatif import rounds
from profplug.analyzers.whatif.finding import whatif_headline
from profplug.analyzers.whatif.predict import whatif
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult
from profplug.analyzers.whatif.unprofiled import whatif_unprofiled

LABEL = "what-if"  # what its warnings call it


@dataclass(frozen=True)
class Reductions:
    """A rank's reductions (``rounds.rank_reductions``) by the rule ``kinds`` (at
    ``callsite`` only, when given: ``--drop-at`` resolved); ``ops``: its NCCL kernels, None:
    those of the comm view it is called with (round one)."""

    kinds: str
    callsite: str | None = None
    ops: np.ndarray | None = None
    needs_stalls = False

    def __call__(self, tl: Timeline, view: CommView | RankResult | None) -> rounds.RankReductions:
        ops = self.ops
        if ops is None:  # round one: its comm view's
            assert isinstance(view, CommView)
            ops = view.op_index
        trim_large(tl.n_events)  # the heap's freed memory back first: a big rank's peak
        return rounds.rank_reductions(tl, self.kinds, ops, self.callsite)


@dataclass(frozen=True)
class SiteCounts:
    """A rank's sync call sites by the rule ``kinds`` (``--drop-at`` before it is resolved)."""

    kinds: str

    def __call__(self, tl: Timeline, view: CommView | None) -> object:
        return site_counts(tl, self.kinds)


@dataclass(frozen=True)
class RankResultStep:
    """A rank's what-if result from the client's solve (``rounds.rank_whatif``)."""

    ask: rounds.WhatIfAsk
    needs_stalls = False

    def __call__(self, tl: Timeline, stall: RankResult | None) -> RankWhatIf:
        return rounds.rank_whatif(tl, self.ask)


def _first_error(values: dict[int, Outcome]) -> Done | None:
    bad = next((e for e in values.values() if isinstance(e, TaskError)), None)
    return None if bad is None else Done(None, TaskError(bad.kind, bad.line(LABEL)))


@dataclass(frozen=True)
class WhatIfRounds:
    """The what-if in rounds (``core.analysis_spec.RoundsCapability``): ``drop`` its rule;
    ``max_events``: its limit in one process (None: none): a joined graph with a cycle on a
    run within it asks for the run in one process, past it says why it did not run."""

    drop: DropSpec
    max_events: int | None = None
    big_runs_only = True  # below, its replay in one process costs less than its rounds

    def first_part(self) -> FirstPart:
        """Each rank's reductions; with ``--drop-at``, its call sites to resolve it over."""
        if self.drop.callsite is not None:
            return SiteCounts(self.drop.kinds)
        return Reductions(self.drop.kinds)

    def plan(self, run: RunViews, firsts: dict[int, Outcome]) -> Next:
        if not run.views:  # no GPU work: in one process, which says so
            return NeedsTimelines()
        if self.drop.callsite is None:
            return self._solved(run, self.drop, firsts)
        failed = _first_error(firsts)
        if failed is not None:
            return failed
        try:  # --drop-at: resolved over the ranks' call sites, then reduced by it
            sites = {r: v.value for r, v in firsts.items() if isinstance(v, Ok)}
            rule = rounds.resolved_at(self.drop, [sites[r] for r in run.ranks])
        except ProfplugError as exc:
            return Done(None, TaskError.of(exc))
        return Asks(
            {v.rank: Reductions(rule.kinds, rule.callsite, v.op_index) for v in run.views},
            lambda values, lost: self._solved(run, rule, values),
        )

    def _solved(self, run: RunViews, drop: DropSpec, values: dict[int, Outcome]) -> Next:
        """The client's solve from the ranks' reductions, then each rank asked for its
        result; a joined graph with a cycle: the run in one process, within its size."""
        failed = _first_error(values)
        if failed is not None:
            return failed
        made = {r: v.value for r, v in values.items() if isinstance(v, Ok) and v.value is not None}
        if any(r not in made for r in run.ranks):
            return Done(None, TaskError.declined(f"{LABEL}: a rank's reduction did not come back"))
        reds: list[rounds.RankReductions] = [made[r] for r in run.ranks]
        views = run.views
        try:
            wp = rounds.plan(
                reds,
                run.matching,
                run.partners,
                [v.op_index for v in views],
                [v.tl.gpu_start_ns for v in views],
                [v.tl.gpu_end_ns for v in views],
                drop,
                run.options,
            )
        except ProfplugError as exc:  # a cycle
            if self.max_events is None or run.n_events <= self.max_events:
                return NeedsTimelines()
            return Done(None, TaskError.of(exc))
        return Asks(
            {a.rank: RankResultStep(a) for a in wp.asks},
            lambda results, lost: _joined(wp, run, reds, results, lost),
        )


def _joined(
    wp: rounds.WhatIfPlan,
    run: RunViews,
    reds: list[rounds.RankReductions],
    values: dict[int, Outcome],
    lost: str,
) -> Done:
    """The run's result from the ranks' results, or the line saying why there is none."""
    t0 = time.perf_counter() - wp.solve_s
    failed = _first_error(values)
    if failed is not None:
        return failed
    res = {rank: v.value for rank, v in values.items() if isinstance(v, Ok)}
    missing = [r for r in run.ranks if not isinstance(res.get(r), RankWhatIf)]
    if missing:
        return Done(None, TaskError.declined(f"{LABEL} not run: ranks {missing}: {lost}"))
    order = {r: i for i, r in enumerate(run.all_ranks)}
    ranks = sorted((res[r] for r in run.ranks), key=lambda w: order.get(w.rank, 0))
    sizes = [w for r in reds if (w := r.world_size) is not None]
    comm = any(bool(v.op_index.size) for v in run.views)
    return Done(rounds.joined(wp, ranks, run.all_ranks, sizes, comm, run.n_events, t0))


@dataclass(frozen=True)
class Unprofiled:
    """An unprofiled run's step (us), its CI and the measured speedup's CI, as
    ``whatif_unprofiled`` takes them (``compare A AB_DIR``: ab's device step)."""

    step_us: float
    step_ci_us: tuple[float, float] | None = None
    ratio_ci: tuple[float, float] | None = None


def whatif_if_cheap(
    timelines: list[Timeline],
    options: StallOptions,
    drop: DropSpec,
    max_events: int,
    ranks: list[RankResult] | None = None,
    keep_predicted: bool = False,
    memo: Memo | None = None,
) -> WhatIfResult | None:
    """The what-if of a report by default (None without GPU work): run when the run has at
    most ``max_events`` API calls + GPU ops (~2 us each); else a ProfplugError saying so,
    which the report keeps as a warning. ``memo``: the report's (``core.memo``)."""
    if not any(t.n_gpu for t in timelines):  # nothing to replay: the host-only summary
        return None
    n = sum(t.n_events for t in timelines)
    if n > max_events:
        raise ProfplugError(
            f"what-if not run by default on {n:,} events (over {max_events:,}): --whatif runs it"
        )
    return whatif(timelines, drop, options, ranks=ranks, keep_predicted=keep_predicted,
                  memo=memo)


def whatif_analysis(
    drop: DropSpec | None = None,
    *,
    max_events: int | None = None,
    cache_key: str | None = None,
    keep_predicted: bool = False,
    when_cheap: bool = False,
    unprofiled: Unprofiled | None = None,
) -> AnalysisSpec:
    """:func:`whatif` as a run-level analysis of a report:
    ``analyze(paths, run=[whatif_analysis()])`` puts its result in ``Report.run``, under
    ``WhatIfResult.key``. It runs in rounds where the ranks are read on big runs
    (:class:`WhatIfRounds`). ``max_events``: its limit in one process; ``when_cheap``: the
    report's default, which runs in one process only within ``max_events`` and says why not
    past it (:func:`whatif_if_cheap`); ``cache_key``: what its result is cached under
    (default: its drop rule); ``keep_predicted``: with the predicted timelines
    (``--trace-out``; in one process only, never cached); ``unprofiled``: at an unprofiled
    run's host speed (``whatif_unprofiled``; in one process only, never cached)."""
    drop = drop or DropSpec()
    limit = max_events

    def run(
        timelines: list[Timeline], options: StallOptions, ranks: list[RankResult] | None,
        memo: Memo,
    ) -> WhatIfResult | None:
        if unprofiled is not None:
            return whatif_unprofiled(
                timelines,
                unprofiled.step_us,
                drop,
                options,
                step_ci_us=unprofiled.step_ci_us,
                ratio_ci=unprofiled.ratio_ci,
                memo=memo,
            )
        if when_cheap and limit is not None:
            return whatif_if_cheap(timelines, options, drop, limit, ranks, keep_predicted, memo)
        return whatif(timelines, drop, options, ranks=ranks, keep_predicted=keep_predicted,
                      memo=memo)

    auto = f"whatif auto<={max_events} " if when_cheap else "whatif "
    alone = keep_predicted or unprofiled is not None  # in one process, never cached
    return AnalysisSpec(
        name=WhatIfResult.key,
        label=LABEL,
        run=run,
        cache_key=None if alone else cache_key or f"{auto}{drop!r}",
        rounds=None if alone else WhatIfRounds(drop, max_events),
        headline=whatif_headline,
    )
