"""What-if replay, end to end: each rank's step time if chosen synchronizes did not block.

``whatif(timelines)`` builds the dependency model of the whole run (``model``, ``graph``),
replays it twice (``simulate``): as recorded (the model's own error) and with the dropped
calls non-blocking; then compares per rank. The step time is the report's own per-step
figure (``StepStats.period_us``) for the recorded timeline, and for a replay the same less
each step's median change (``step_figures``): one step basis for ``report`` and ``whatif``.
The stall analysis (``analyze_rank``) runs on the predicted timeline (its idle by cause;
the timeline kept on asking: ``--trace-out``); the replayed one needs only its steps
(``step_figures.replayed_ns``); the recorded one is the report's when it passes its ranks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace
from functools import cache

import numpy as np
from profplug.analyzers.core import vocabulary
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.timeline import Timeline, groups
from profplug.analyzers.graph import dropset
from profplug.analyzers.graph.dropat import resolve_callsite
from profplug.analyzers.graph.events import DROPPED_GRAPH_READS, build_graph, dropped_graph
from profplug.analyzers.graph.model import DropSpec, Model, build_model, replay_only
from profplug.analyzers.stalls.gaps import CAUSES, NO_GAPS
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank
from profplug.analyzers.whatif import step_figures
from profplug.analyzers.whatif.bands import set_bands, withhold_bands
from profplug.analyzers.whatif.bound import apply_bound, bound_note, host_cadence_us
from profplug.analyzers.whatif.costs import HostCosts
from profplug.analyzers.whatif.peers import missing_peers
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


def _scaled(x: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``x * num / den`` rounded, in int64 ns: exact while ``x * num`` fits int64; past that
    (a host gap over ~3 s) in float64, within 1 ns for spans under 10^15 ns."""
    big = np.abs(x.astype(np.float64) * num) >= 2.0 ** 62
    if not big.any():  # every product exact
        return (x * num + den // 2) // den
    exact = (np.where(big, 0, x) * np.where(big, 0, num) + den // 2) // den
    # only the large products, clipped to int64 (a time far outside, a clock jump)
    approx = np.rint(np.where(big, x, 0).astype(np.float64) * (num.astype(np.float64) / den))
    approx = np.clip(approx, -(2.0 ** 62), 2.0 ** 62)
    return np.where(big, approx.astype(np.int64), exact)


def _shift(m: Model, r: Replay, seq: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Move host times ``t`` with the replayed calls of one thread (``seq``, in order). A
    time inside a call or inside the host gap between two calls keeps its fraction of
    that call or gap, so a step boundary stays between the same two calls when the replay
    shortens gaps (dropped calls' host work, ``HostCosts``); before the first call or after
    the last one it moves with that call."""
    if not len(seq) or t.size == 0:
        return t.copy()
    idx = np.asarray(seq)
    rs, re_ = m.a_start[idx], m.a_end[idx]
    ss, se = r.a_start[idx], r.a_end[idx]
    n = idx.size
    i = np.searchsorted(rs, t, side="left")  # first call starting at or after t
    out = np.where(i < n, t + ss[np.minimum(i, n - 1)] - rs[np.minimum(i, n - 1)],
                   t + se[-1] - re_[-1])
    p = np.maximum(i - 1, 0)  # the call starting before t
    mid = (i > 0) & (i < n)
    in_call = (i > 0) & (t < re_[p])
    # inside call p: the same fraction of its replayed duration
    span = np.maximum(re_[p] - rs[p], 1)
    f_call = ss[p] + _scaled(t - rs[p], se[p] - ss[p], span)
    out = np.where(in_call, f_call, out)
    # in the gap after call p: the same fraction of the replayed gap
    k = np.minimum(i, n - 1)
    gap = np.maximum(rs[k] - re_[p], 1)
    f_gap = se[p] + _scaled(t - re_[p], ss[k] - se[p], gap)
    return np.where(mid & ~in_call, f_gap, out)


def _predicted_timeline(tl: Timeline, m: Model, r: Replay, main: np.ndarray, drop: bool,
                        annotations: bool = True) -> Timeline:
    """The replayed run as a Timeline; ``drop``: without the dropped calls; no
    ``annotations``: they stay where they were (only the steps move)."""
    alo, ahi = m.rank_a[tl.rank]
    olo, ohi = m.rank_o[tl.rank]
    a_s, a_e = r.a_start, r.a_end
    ann_s, ann_e = tl.ann_start_ns, tl.ann_end_ns
    ann_of = dict(groups(tl.ann_tid)) if annotations else {}  # thread -> its annotations
    if ann_of:  # moved below: copies (the trace's own arrays stay as they are)
        ann_s, ann_e = ann_s.copy(), ann_e.copy()
    for (rank, tid), seq in zip(m.thread_key, m.threads, strict=True):
        sel = ann_of.get(tid) if rank == tl.rank else None
        if sel is not None:  # starts and ends in one call (element by element)
            both = _shift(m, r, seq, np.concatenate([tl.ann_start_ns[sel], tl.ann_end_ns[sel]]))
            ann_s[sel] = both[:sel.size]
            ann_e[sel] = np.maximum(both[sel.size:], ann_s[sel])
    n_st = tl.step_start_ns.size
    both = _shift(m, r, main, np.concatenate([tl.step_start_ns, tl.step_end_ns]))
    st_s = both[:n_st]
    st_e = np.maximum(both[n_st:], st_s)
    # dropped calls are gone, with the calls nested in them
    keep = slice(None) if not drop else ~m.a_dropped[m.a_top[alo:ahi]]
    return _with(tl, gpu_start_ns=r.o_start[olo:ohi], gpu_end_ns=r.o_end[olo:ohi],
                   api_start_ns=a_s[alo:ahi][keep], api_end_ns=a_e[alo:ahi][keep],
                   api_tid=tl.api_tid[keep], api_name=tl.api_name[keep],
                   api_corr=tl.api_corr[keep], ann_start_ns=ann_s,
                   ann_end_ns=ann_e, step_start_ns=st_s, step_end_ns=st_e,
                   warnings=[], skipped={})


@cache
def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _with(tl: Timeline, **changes: object) -> Timeline:
    """``dataclasses.replace(tl, **changes)`` without its per-field ``__init__`` (~15 us a
    call): Timeline has no ``__post_init__`` nor init-less field, so the same state."""
    out = object.__new__(Timeline)
    state = {k: tl.__dict__[k] for k in _fields(Timeline)}
    state.update(changes)
    out.__dict__.update(state)
    return out


def launch_times(a_start: np.ndarray, top: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Each op's launch time (ns): the start of its top-level launch call (``top`` >= 0, an
    index into ``a_start``), else ``own`` (its own start: no host call launched it)."""
    out = own.copy()
    has = top >= 0
    out[has] = a_start[top[has]]
    return out


def _links(m: Model, r: Replay, rank: int, keep: np.ndarray
           ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The predicted timeline's (kept calls') top-level sync kinds and its ops' launch times,
    as its own stall analysis would find them, from the model's: (None, None) unless the
    replay kept the recorded nesting (each kept nested call starts inside its top-level call
    and sorts after it; each thread's top-level calls start after the previous one's end,
    in order) and no op was launched by a dropped call; then ``top_level`` on the
    replayed times gives the recorded tops, and a correlation lookup the recorded launches."""
    alo, ahi = m.rank_a[rank]
    olo, ohi = m.rank_o[rank]
    ot = m.o_top[olo:ohi]
    linked = ot >= 0
    if m.a_dropped[ot[linked]].any():
        return None, None
    s, e = r.a_start[alo:ahi], r.a_end[alo:ahi]
    top = m.a_top[alo:ahi] - alo if alo else m.a_top[:ahi]
    c = (keep & (top != np.arange(ahi - alo))).nonzero()[0]
    t = top[c]
    sc, et = s[c], e[t]
    if not ((sc < et) & ((s[t] < sc) | (e[c] < et) | (t < c))).all():
        return None, None
    # every top-level call and the one before it on its thread (dropped ones too: a chain
    # of such starts and ends orders the kept calls as well)
    prev = m.a_prev[alo:ahi]
    b = (prev >= 0).nonzero()[0]
    a = prev[b] - alo if alo else prev[b]
    sb = s[b]
    if not ((sb >= e[a]) & (sb > s[a])).all():
        return None, None
    launch = launch_times(r.a_start, ot, r.o_start[olo:ohi])
    return m.a_kind[alo:ahi][keep], launch


def _time_ns(rs: RankResult, basis: vocabulary.Basis, recorded: RankResult | None = None) -> float:
    """The step time (a replay's over ``recorded``'s steps), else the GPU window; ns."""
    return step_figures.step_ns(rs, basis, recorded)


def _idle(rs: RankResult, basis: vocabulary.Basis) -> dict[str, float]:
    if basis == vocabulary.Basis.STEP and rs.steps is not None and rs.steps.n_steps:
        return {c: round(rs.steps.idle_per_step_us.get(c, 0.0), 3) for c in CAUSES}
    return {c: round(v, 3) for c, v in rs.idle_by_cause_us().items()}


# of the model's graph inputs (model._IN_GRAPH), what the per-rank results read (_links)
_RESULTS_READ = ("o_top", "a_prev")


@dataclass
class _Replayed:
    """A rank's recorded side: its stall analysis without its gaps, the basis (``step`` or
    ``window``), its steps, recorded and replayed time, direct idle (ns), idle by cause."""

    rs: RankResult
    basis: vocabulary.Basis
    n_steps: int
    rec_ns: float
    replayed_ns: float
    direct_ns: float
    idle_us: dict[str, float]


def _recorded_side(tl: Timeline, m: Model, opt: StallOptions, rs: RankResult | None
                   ) -> _Replayed:
    """The recorded side of a rank's result but its replayed time (``replayed_ns``: nan
    until :func:`_replayed` sets it): its stall analysis needs no replay, so that a worker
    runs it before either replay exists (a worker's peak: docs/scale.md)."""
    # the recorded run's figures read only its gaps, steps and sync rows: the brief analysis
    # (no call sites, sync statistics or outlier texts) when the caller has none
    alo, ahi = m.rank_a[tl.rank]
    olo, ohi = m.rank_o[tl.rank]
    if rs is None:  # the model's kinds and launches are the analysis's own
        ot = m.o_top[olo:ohi]
        rs = analyze_rank(tl, opt, brief=True, api_kind=m.a_kind[alo:ahi],
                          launch=launch_times(m.a_start, ot, m.o_start[olo:ohi]))
    basis = vocabulary.Basis.STEP if step_figures.has_steps(rs) else vocabulary.Basis.WINDOW
    n_steps = rs.steps.n_steps if basis == vocabulary.Basis.STEP and rs.steps is not None else 1
    # direct: gaps charged (by the stall analysis) to a call the replay drops
    dropped_call = m.a_dropped[alo + rs.call_row]
    g = rs.gaps
    hit = g.call >= 0
    hit[hit] = dropped_call[g.call[hit]]
    rows = rs.call_row  # the time each sync call blocked the host: direct's ceiling
    direct = step_figures.direct_ns(rs, basis, hit, tl.api_end_ns[rows] - tl.api_start_ns[rows])
    return _Replayed(replace(rs, gaps=NO_GAPS), basis, n_steps, _time_ns(rs, basis),
                     float("nan"), direct, _idle(rs, basis))


def _replayed(tl: Timeline, m: Model, rec: Replay, opt: StallOptions,
              side: RankResult | _Replayed | None) -> _Replayed:
    """The recorded side of a rank's result (``rec``: the replay as recorded; ``side``: the
    stall analysis, or :func:`_recorded_side` already made), so that the replay and the
    analysis's gaps can go before the other replay is made (a worker's peak:
    docs/scale.md)."""
    r = side if isinstance(side, _Replayed) else _recorded_side(tl, m, opt, side)
    alo, ahi = m.rank_a[tl.rank]
    olo, ohi = m.rank_o[tl.rank]
    if step_figures.has_steps(r.rs) and all(bool((x[lo:hi] == y[lo:hi]).all()) for x, y, lo, hi in (
            (rec.o_start, m.o_start, olo, ohi), (rec.o_end, m.o_end, olo, ohi),
            (rec.a_start, m.a_start, alo, ahi), (rec.a_end, m.a_end, alo, ahi))):
        replayed = r.rec_ns  # the replay reproduced the rank: its steps are the recorded ones
    else:
        rep_tl = _predicted_timeline(tl, m, rec, _main_thread(m, tl.rank), False,
                                     annotations=False)
        replayed = step_figures.replayed_ns(rep_tl, r.basis, r.rs)
        del rep_tl
    return replace(r, replayed_ns=replayed)


def _main_thread(m: Model, rank: int) -> np.ndarray:  # the thread with most top-level calls
    return max((seq for (rk, _), seq in zip(m.thread_key, m.threads, strict=True)
                if rk == rank), key=len, default=np.zeros(0, dtype=np.int64))


def _rank_result(tl: Timeline, m: Model, rec: Replay | _Replayed, drp: Replay,
                 opt: StallOptions, rs: RankResult | None = None,
                 keep: dict[int, Timeline] | None = None) -> RankWhatIf:
    """A rank's result from both replays (or the recorded side already made); ``keep``:
    where its predicted timeline is kept (``WhatIfResult.predicted``), None: not kept."""
    r = rec if isinstance(rec, _Replayed) else _replayed(tl, m, rec, opt, rs)
    rs, basis, n_steps, rec_ns, replayed = r.rs, r.basis, r.n_steps, r.rec_ns, r.replayed_ns
    alo, ahi = m.rank_a[tl.rank]
    # the brief analysis reads no annotation: they stay where they were
    kinds, launch = _links(m, drp, tl.rank, ~m.a_dropped[m.a_top[alo:ahi]])
    pred_tl = _predicted_timeline(tl, m, drp, _main_thread(m, tl.rank), True,
                                  annotations=False)
    pred_rs = analyze_rank(pred_tl, opt, brief=True, api_kind=kinds, launch=launch)
    cadence = host_cadence_us(pred_tl, rs) if basis == vocabulary.Basis.STEP else 0.0
    if keep is not None:  # the replay's own times, as its figures read them
        keep[tl.rank] = pred_tl
    del pred_tl
    times = {"predicted": _time_ns(pred_rs, basis, rs), "replayed": replayed}
    direct_ns = r.direct_ns
    saving = rec_ns - times["predicted"]
    us = 1000.0
    return RankWhatIf(
        rank=tl.rank, basis=basis, n_steps=n_steps if basis == vocabulary.Basis.STEP else 0,
        recorded_us=round(rec_ns / us, 3), replayed_us=round(times["replayed"] / us, 3),
        model_error_pct=round(100.0 * (times["replayed"] - rec_ns) / rec_ns, 2)
        if rec_ns else 0.0,
        predicted_us=round(times["predicted"] / us, 3), saving_us=round(saving / us, 3),
        saving_pct=round(100.0 * saving / rec_ns, 2) if rec_ns else 0.0,
        direct_us=round(direct_ns / us, 3), indirect_us=round((saving - direct_ns) / us, 3),
        dropped_calls=int(m.a_dropped[alo:ahi].sum()),
        recorded_idle_by_cause_us=r.idle_us,
        predicted_idle_by_cause_us=_idle(pred_rs, basis),
        between_steps_idle_us=rs.steps.between_steps_idle_us
        if basis == vocabulary.Basis.STEP and rs.steps is not None else 0.0,
        host_cadence_us=cadence)


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


def _whatif(timelines: list[Timeline], drop: DropSpec | None, options: StallOptions | None,
            host: HostCosts | None, ranks: list[RankResult] | None,
            keep: dict[int, Timeline] | None, memo: Memo | None) -> WhatIfResult:
    opt, memo = options or StallOptions(), memo or Memo()
    if not timelines or not any(t.n_gpu for t in timelines):
        raise ProfplugError("what-if: no GPU work in the given traces")
    drop, drop_note = dropset.resolve(timelines, drop or DropSpec(), memo)
    if drop.callsite is not None:  # the name as the report prints it, or a unique part,
        # among the call sites of the ranks with GPU work (the ranks it predicts)
        drop = replace(drop, callsite=resolve_callsite(
            drop.callsite, [tl for tl in timelines if tl.n_gpu], drop.kinds))
    t0 = time.perf_counter()
    try:
        m = build_model(timelines, drop, memo=memo)
        # one graph for both replays (other host costs change every weight: built again);
        # the client's memory: once a graph exists, the model's inputs to it go
        if host:
            rec = times_only(replay(m, drop=False))
            drp = times_only(replay(host.apply(m), drop=True))
        else:
            recorded = build_graph(m, drop=False)
            m = replay_only(m, keep=DROPPED_GRAPH_READS + _RESULTS_READ)
            trim_large(m.n_events)  # what the model's build and the graph's freed
            rec = times_only(replay(m, False, graph=recorded))
            dropped = dropped_graph(recorded, m)
            del recorded
            m = replay_only(m, keep=_RESULTS_READ)
            trim_large(m.n_events)
            drp = times_only(replay(m, True, graph=dropped))
            del dropped
        replay_s = time.perf_counter() - t0
        given = {r.rank: r for r in ranks or []}
        res_ranks = [_rank_result(tl, m, rec, drp, opt, given.get(tl.rank), keep)
                     for tl in timelines if tl.n_gpu]
    except RuntimeError as exc:
        raise ProfplugError(f"what-if: {exc}") from None
    except OverflowError:  # readers keep times within +-2^62 ns; a hand-made timeline may not
        files = ", ".join(f for t in timelines for f in t.files)
        raise ProfplugError(f"what-if: {files}: times too far apart to replay "
                            "(beyond the int64 nanosecond range)") from None
    coupled = bool((m.o_peer >= 0).any())
    apply_bound(res_ranks, coupled)
    set_bands(res_ranks, coupled=coupled)
    if peers := missing_peers(timelines, memo):
        withhold_bands(res_ranks)
    bound = bound_note(res_ranks)
    warnings = [*([peers] if peers else []), *([bound] if bound else []), *m.warnings,
                *rec.warnings, *drp.warnings]
    if not m.a_dropped.any():
        warnings.append("no call matched the drop rule: the prediction equals the replay")
    return WhatIfResult(
        drop=drop.kinds, callsite=drop.callsite, ranks=res_ranks, drop_note=drop_note,
        assumptions=[*ASSUMPTIONS, *m.assumptions],
        warnings=warnings, n_events=m.n_events, replay_s=replay_s,
        max_model_error_pct=max((abs(r.model_error_pct) for r in res_ranks), default=0.0),
        predicted=keep)
