"""What-if replay, end to end: each rank's step time if chosen synchronizes did not block.

``whatif(timelines)`` resolves the drop rule, builds the dependency model of the whole run
(``graph.model``, ``graph.events``) and replays it twice (``simulate``): as recorded (the
model's own error) and with the dropped calls non-blocking; then reads each rank's figures
(``rank_prediction``) and holds them to the data-flow bound (``bound``), with their bands
(``bands``). The step time is the report's own per-step figure (``StepStats.period_us``)
for the recorded timeline, and for a replay the same less each step's median change
(``step_figures``): one step basis for ``report`` and ``whatif``. The stall analysis
(``analyze_rank``) runs on the predicted timeline (its idle by cause; the timeline kept on
asking: ``--trace-out``); the replayed one needs only its steps
(``step_figures.replayed_ns``); the recorded one is the report's when it passes its ranks.
"""

from __future__ import annotations

import time
from dataclasses import replace

from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph import dropset
from profplug.analyzers.graph.dropat import resolve_callsite
from profplug.analyzers.graph.events import DROPPED_GRAPH_READS, build_graph, dropped_graph
from profplug.analyzers.graph.model import DropSpec, Model, build_model, replay_only
from profplug.analyzers.stalls.rank import RankResult, StallOptions
from profplug.analyzers.whatif.bands import set_bands, withhold_bands
from profplug.analyzers.whatif.bound import apply_bound, bound_note
from profplug.analyzers.whatif.costs import HostCosts
from profplug.analyzers.whatif.model_links import RESULTS_READ
from profplug.analyzers.whatif.peers import missing_peers
from profplug.analyzers.whatif.rank_prediction import (
    RankPrediction,
    brief_stalls,
    predict_rank,
    recorded_side,
    with_replayed_time,
)
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult
from profplug.analyzers.whatif.simulate import Replay, replay, times_only

ASSUMPTIONS = (
    "host time between CUDA API calls is kept as recorded: host work that itself waited "
    "on something outside the trace stays as it was",
    "GPU op durations are kept as recorded (no change in contention or clocks); a NCCL "
    "kernel paired across ranks ends its observed transfer time after the later of the "
    "pair starts (ranks share the trace clock)",
    "a device-wide synchronize waits for the last op launched before it on every stream "
    "of the rank; a dropped synchronize is gone, with the host work of its own range (the "
    "annotation around it and nothing else, and the entry into it); a dropped blocking "
    "copy costs its smallest observed non-blocking duration",
    "an op that was queued behind its stream starts no earlier than its launch plus the "
    "rank's median observed launch latency",
    "step time = the report's: the median over the non-outlier steps of each step's GPU "
    "period (first op it launched to the next step's first op); a replay's step = that "
    "less the median change of each step's end-to-end period (whatif/step_figures.py); step "
    "ranges move with the replayed calls of the thread with the most CUDA calls; without "
    "steps, the GPU window",
    "direct = GPU idle in gaps that started inside a dropped call (stall analysis), its "
    "median per step; saving = recorded - predicted step; indirect = saving - direct "
    "(docs/costs.md)",
)


def whatif(timelines: list[Timeline], drop: DropSpec | None = None,
           options: StallOptions | None = None, *, host: HostCosts | None = None,
           ranks: list[RankResult] | None = None, keep_predicted: bool = False,
           memo: Memo | None = None) -> WhatIfResult:
    """Replay the run as recorded and without the dropped synchronizes; compare per rank.

    ``host``: the predicted run's host costs relative to the trace's (default: the same);
    ``ranks``: the recorded timelines' stall analyses when the caller has them (a report);
    ``keep_predicted``: keep each rank's predicted timeline (``WhatIfResult.predicted``);
    ``memo``: the caller's (``core.memo``; what-ifs of one run share it), else its own."""
    return _whatif(timelines, drop, options, host, ranks, {} if keep_predicted else None, memo)


def _whatif(
    timelines: list[Timeline],
    asked: DropSpec | None,
    options: StallOptions | None,
    host: HostCosts | None,
    ranks: list[RankResult] | None,
    predicted: dict[int, Timeline] | None,
    memo: Memo | None,
) -> WhatIfResult:
    """:func:`whatif`; ``predicted``: an empty dict that takes each rank's predicted
    timeline, None: not kept."""
    stall_options, memo = options or StallOptions(), memo or Memo()
    if not timelines or not any(t.n_gpu for t in timelines):
        raise ProfplugError("what-if: no GPU work in the given traces")
    rule, drop_note = _resolved_rule(timelines, asked or DropSpec(), memo)
    t0 = time.perf_counter()
    try:
        model, recorded_replay, dropped_replay = _model_and_replays(timelines, rule, host,
                                                                    memo)
        replay_s = time.perf_counter() - t0
        results = _ranks_predicted(timelines, model, recorded_replay, dropped_replay,
                                   stall_options, ranks, predicted)
    except RuntimeError as exc:
        raise ProfplugError(f"what-if: {exc}") from None
    except OverflowError:  # readers keep times within +-2^62 ns; a hand-made timeline may not
        files = ", ".join(f for t in timelines for f in t.files)
        raise ProfplugError(
            f"what-if: {files}: times too far apart to replay (beyond the int64 nanosecond range)"
        ) from None
    warnings = [*model.warnings, *recorded_replay.warnings, *dropped_replay.warnings]
    return _run_result(timelines, rule, drop_note, model, results, warnings, replay_s, predicted,
                       memo)


def _resolved_rule(timelines: list[Timeline], asked: DropSpec, memo: Memo
                   ) -> tuple[DropSpec, str | None]:
    """The drop rule the replay applies (``dropset.resolve``: ``policy`` falls back when no
    rank has such a call) and the note saying why it is not the one asked for (None)."""
    rule, drop_note = dropset.resolve(timelines, asked, memo)
    if rule.callsite is None:
        return rule, drop_note
    # --drop-at: the name as the report prints it, or a unique part, among the call sites
    # of the ranks with GPU work (the ranks it predicts)
    with_gpu = [tl for tl in timelines if tl.n_gpu]
    return replace(rule, callsite=resolve_callsite(rule.callsite, with_gpu, rule.kinds)), drop_note


def _model_and_replays(
    timelines: list[Timeline], rule: DropSpec, host: HostCosts | None, memo: Memo
) -> tuple[Model, Replay, Replay]:
    """The run's model and its two replays (times only): as recorded, and without the calls
    ``rule`` drops, at ``host``'s costs when given. Without ``host`` one graph serves both
    replays, and the model keeps only what the rank figures read once it exists (the
    client's memory); other host costs change every weight, so each replay builds its own."""
    model = build_model(timelines, rule, memo=memo)
    if host is not None:
        return (
            model,
            times_only(replay(model, drop=False)),
            times_only(replay(host.apply(model), drop=True)),
        )
    # the model is rebound, not renamed, as it is trimmed: its larger form goes at once
    recorded_graph = build_graph(model, drop=False)
    model = replay_only(model, keep=DROPPED_GRAPH_READS + RESULTS_READ)
    trim_large(model.n_events)  # what the model's build and the graph's freed
    recorded_replay = times_only(replay(model, False, graph=recorded_graph))
    graph_without_dropped = dropped_graph(recorded_graph, model)
    del recorded_graph
    model = replay_only(model, keep=RESULTS_READ)
    trim_large(model.n_events)
    return model, recorded_replay, times_only(replay(model, True, graph=graph_without_dropped))


def _ranks_predicted(timelines: list[Timeline], model: Model, recorded_replay: Replay,
                     dropped_replay: Replay, options: StallOptions,
                     ranks: list[RankResult] | None, predicted: dict[int, Timeline] | None
                     ) -> list[RankWhatIf]:
    """Each rank's figures (the ranks with GPU work, in order); ``ranks``: their recorded
    stall analyses when the caller has them; ``predicted``: where their predicted timelines
    go, None: not kept."""
    given = {r.rank: r for r in ranks or []}
    results = []
    for tl in timelines:
        if not tl.n_gpu:
            continue
        figures, timeline = _predicted_rank(tl, model, recorded_replay, dropped_replay,
                                            options, given.get(tl.rank))
        results.append(figures)
        if predicted is not None:
            predicted[tl.rank] = timeline
        del timeline  # one rank's predicted timeline at a time unless kept
    return results


def _predicted_rank(
    tl: Timeline,
    model: Model,
    recorded_replay: Replay,
    dropped_replay: Replay,
    options: StallOptions,
    given: RankResult | None,
) -> RankPrediction:
    """One rank's figures and predicted timeline; ``given``: its recorded stall analysis
    when the caller has it (a report), else the brief one is made here."""
    stalls = brief_stalls(tl, model, options) if given is None else given
    side = recorded_side(tl, model, stalls)
    del stalls  # its gaps: the recorded side keeps none
    replayed = with_replayed_time(tl, model, recorded_replay, side)
    return predict_rank(tl, model, replayed, dropped_replay, options)


def _run_result(
    timelines: list[Timeline],
    rule: DropSpec,
    drop_note: str | None,
    model: Model,
    results: list[RankWhatIf],
    warnings: list[str],
    replay_s: float,
    predicted: dict[int, Timeline] | None,
    memo: Memo,
) -> WhatIfResult:
    """The run's result: the ranks' figures held to the data-flow bound, with their bands;
    ``warnings``: the model's and the replays'."""
    coupled = bool((model.o_peer >= 0).any())
    apply_bound(results, coupled)
    set_bands(results, coupled=coupled)
    peers_note = missing_peers(timelines, memo)
    if peers_note:
        withhold_bands(results)
    bound = bound_note(results)
    notes = [*([peers_note] if peers_note else []), *([bound] if bound else []), *warnings]
    if not model.a_dropped.any():
        notes.append("no call matched the drop rule: the prediction equals the replay")
    return WhatIfResult(
        drop=rule.kinds,
        callsite=rule.callsite,
        ranks=results,
        drop_note=drop_note,
        assumptions=[*ASSUMPTIONS, *model.assumptions],
        warnings=notes,
        n_events=model.n_events,
        replay_s=replay_s,
        max_model_error_pct=max((abs(r.model_error_pct) for r in results), default=0.0),
        predicted=predicted,
    )

