"""One run's report (or two, for ``compare``) as one merged Chrome trace: every rank a process
on the aligned clock, the what-if's prediction of each rank a process beside it, profplug's
tracks and arrows drawn in (``overlay``), and the figures they were drawn from in the file's
``otherData.profplug`` block.

The report must hold its Timelines (``analyze(keep_timelines=True)``) for the recorded
tracks; the what-if its predicted timelines (``whatif(keep_predicted=True)``) for the
predicted processes; the cross-rank analysis gives the clock offsets, the pairs and the
critical path. What a report lacks is left out and said so in the metadata (``notes``).

Which part of the trace (:class:`TraceAsk`): by default each rank's analyzed window (its GPU
window: every idle gap is in it), and the predicted processes' GPU ops and step ranges; or
the whole recorded trace and the predicted host calls too (``full``); or ``steps``
consecutive complete steps on every rank (from the second when there are more: the first is
often a warm-up), the same aligned span for all ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TextIO

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.version import __version__
from profplug.analyzers.crossrank.result import CrossRankResult
from profplug.analyzers.render.chrometrace import overlay
from profplug.analyzers.render.chrometrace.tracks import Proc, draw_gpu, draw_host, window_of
from profplug.analyzers.render.chrometrace.writer import TraceWriter
from profplug.analyzers.render.palette import COLORS
from profplug.analyzers.report.analysis import Report
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.rank import RankResult
from profplug.analyzers.stalls.result import us
from profplug.analyzers.whatif.result import WhatIfResult

PID_RUN = 100_000  # pids: run * PID_RUN + 2 * rank + 1 (recorded), + 2 (predicted)
# the predicted process's name: what stays of the waits once the dropped syncs are gone
PREDICTED = MappingProxyType({"policy": "event waits", "device-sync": "no device-wide syncs",
                              "all-sync": "no host-blocking syncs", "none": "as recorded"})


@dataclass(frozen=True)
class TraceAsk:
    """What part of the trace to write, and the command line it came from (metadata)."""

    full: bool = False
    steps: int | None = None
    command: str = ""

    @property
    def part(self) -> str:
        if self.steps is not None:
            return f"{self.steps} steps"
        return "full trace" if self.full else "analyzed window"


def render_trace(runs: list[tuple[str, Report]], out: TextIO, ask: TraceAsk) -> dict[str, Any]:
    """Write the merged trace of ``runs`` (label, report; label "" for a single run) to
    ``out``; returns its metadata block (the file's first key)."""
    w = TraceWriter(out)
    plans = [_plan(w, i, label, rep, ask) for i, (label, rep) in enumerate(runs)]
    meta = {"version": __version__, "command": ask.command, "part": ask.part,
            "finding": runs[0][1].headline() if len(runs) == 1 else
            {label: rep.headline() for label, rep in runs},
            "colors": {c: {"hex": COLORS[c], "cname": overlay.cname(c)}
                       for c in (*CAUSES, "peer_wait")},
            "runs": [pl.meta for pl in plans]}
    w.begin({"profplug": meta})
    try:
        for pl in plans:
            _draw(pl)
    except BaseException:
        w.close(failed=True)
        raise
    w.close()
    return meta


@dataclass
class _Plan:
    """One run: its report and results, and each process with its window (rank clock)."""

    label: str
    rep: Report
    xr: CrossRankResult | None
    tls: dict[int, Timeline]
    procs: dict[int, Proc]  # recorded, by rank
    predicted: list[tuple[Proc, Timeline]]
    meta: dict[str, Any]
    ask: TraceAsk


def _offsets(xr: CrossRankResult | None) -> tuple[dict[int, int], str]:
    """Per rank, the ns that put its clock on the aligned one, and how they were found."""
    m = None if xr is None else xr.matched
    if m is None:
        return {}, "not aligned: no cross-rank analysis (each rank on its trace's clock)"
    if m.clock_refused:
        return {}, f"not aligned: {m.clock_refused}"
    return {int(r): int(o) for r, o in zip(m.ranks, m.offset_ns.tolist(), strict=True)}, \
        m.clock_rule


def _steps_span(rep: Report, off: dict[int, int], n: int) -> tuple[int, int, list[int]] | None:
    """The aligned span of ``n`` complete steps of the rank with the most, and their step
    numbers; None without steps."""
    ranks = [r for r in rep.ranks if r.step_starts_ns.size and r.steps is not None]
    if not ranks or n < 1:
        return None
    ref = max(ranks, key=lambda r: r.step_starts_ns.size)
    k = ref.step_starts_ns.size
    first = 1 if k > n + 1 else 0
    last = min(first + n, k) - 1
    o = off.get(ref.rank, 0)
    nums = [ref.steps.number(i) for i in range(first, last + 1)]  # type: ignore[union-attr]  # ranks: with steps
    return int(ref.step_starts_ns[first]) + o, int(ref.step_ends_ns[last]) + o, nums


def _plan(w: TraceWriter, i: int, label: str, rep: Report, ask: TraceAsk) -> _Plan:
    """One run's processes, their windows and its metadata; nothing written yet."""
    xr = rep.run.get(CrossRankResult.key)
    xr = xr if isinstance(xr, CrossRankResult) else None
    wi = rep.run.get(WhatIfResult.key)
    wi = wi if isinstance(wi, WhatIfResult) else None
    off, rule = _offsets(xr)
    tls = {tl.rank: tl for tl in rep.timelines}
    starts = [ws + off.get(r.rank, 0) for r in rep.ranks for ws, _ in r.windows_ns.values()]
    origin = min(starts, default=0)
    span = _steps_span(rep, off, ask.steps) if ask.steps is not None else None
    procs: dict[int, Proc] = {}
    ranks_meta = []
    for r in rep.ranks:
        o = off.get(r.rank, 0)
        lo, hi = _window(r.windows_ns, ask, span, o)
        procs[r.rank] = p = Proc(w, i * PID_RUN + 2 * r.rank + 1, o, origin, lo, hi)
        ranks_meta.append(_rank_meta(r, overlay.idle_drawn(p, r), o, lo, hi))
    pred_meta, predicted = _predicted(w, i, rep, wi, ask, span, off, origin, tls)
    meta = {"label": label, "origin_ns": origin,
            "clock": {"rule": rule, "offsets_us": {str(r): us(o) for r, o in off.items()}},
            "ranks": ranks_meta, "whatif": pred_meta,
            "notes": _notes(rep, xr, wi, ask, span),
            "steps_drawn": None if span is None else span[2]}
    return _Plan(label, rep, xr, tls, procs, predicted, meta, ask)


def _draw(pl: _Plan) -> None:
    """Write one run's processes and arrows."""
    xr, who = pl.xr, f"{pl.label}: " if pl.label else ""
    for r in pl.rep.ranks:
        p = pl.procs[r.rank]
        p.w.process(p.pid, f"{who}rank {r.rank}", p.pid)
        overlay.draw_steps(p, r)
        overlay.draw_gaps(p, r)
        if xr is not None and r.rank in xr.ranks:
            overlay.draw_waits(p, xr.bubble(r.rank).waits)
        tl = pl.tls.get(r.rank)
        if tl is not None:
            draw_gpu(p, tl)
            draw_host(p, tl)
    if xr is not None and xr.paths is not None:
        overlay.draw_path(pl.procs, list(xr.ranks), xr.paths)
    if xr is not None and xr.matched is not None and pl.tls:
        overlay.draw_matched(pl.procs, pl.tls, {b.rank: b for b in xr.bubbles}, xr.matched)
    wi = pl.rep.run.get(WhatIfResult.key)
    name = _predicted_name(wi) if isinstance(wi, WhatIfResult) else ""
    for p, pred in pl.predicted:
        p.w.process(p.pid, f"{who}rank {pred.rank} (predicted, {name})", p.pid)
        _predicted_steps(p, pred)
        draw_gpu(p, pred)
        if pl.ask.full:  # its host calls (as many as the recorded: the file's size doubles)
            draw_host(p, pred, annotations=False)  # the replay leaves them where they were


def _predicted_name(wi: WhatIfResult) -> str:
    """What the predicted run waits with instead (the process's name)."""
    return PREDICTED.get(wi.drop, wi.dropped()) + (f" at {wi.callsite}" if wi.callsite else "")


def _window(windows: dict[int, tuple[int, int]], ask: TraceAsk,
            span: tuple[int, int, list[int]] | None, o: int) -> tuple[int | None, int | None]:
    """A rank's window on its own clock (None, None: everything)."""
    if span is not None:
        return span[0] - o, span[1] - o
    if ask.full or not windows:
        return None, None
    return min(a for a, _ in windows.values()), max(b for _, b in windows.values())


def _rank_meta(r: RankResult, drawn: dict[int, dict[str, int]], o: int, lo: int | None,
               hi: int | None) -> dict[str, Any]:
    """The report's idle by cause next to the overlay's (what the slices add up to)."""
    return {"rank": r.rank, "clock_offset_ns": o, "window_ns": [lo, hi],
            "idle_by_cause_us": {k: round(v, 3) for k, v in r.idle_by_cause_us().items()},
            "overlay_idle_by_cause_us": {c: us(sum(d[c] for d in drawn.values()))
                                         for c in CAUSES},
            "devices": [{"device": d.device, "idle_by_cause_us": d.idle_by_cause_us,
                         "overlay_idle_by_cause_us": {
                             c: us(drawn.get(d.device, {}).get(c, 0)) for c in CAUSES}}
                        for d in r.devices],
            "gaps_left_out": {str(d): n for d, (n, _) in r.gaps.left.items()}}


def _predicted(w: TraceWriter, i: int, rep: Report, wi: WhatIfResult | None,
               ask: TraceAsk, span: tuple[int, int, list[int]] | None, off: dict[int, int],
               origin: int, tls: dict[int, Timeline]
               ) -> tuple[dict[str, Any] | None, list[tuple[Proc, Timeline]]]:
    """Each rank's predicted process (the replay's own times), beside its recorded one, and
    the what-if's figures for the metadata. With ``steps``, each predicted rank is shifted so
    that its first step drawn starts where the recorded one's does (said per rank)."""
    if wi is None:
        return None, []
    out: dict[str, Any] = {"drop": wi.drop, "dropped": wi.dropped(), "ranks": []}
    procs = []
    for rw in wi.ranks:
        pred = (wi.predicted or {}).get(rw.rank)
        entry = {"rank": rw.rank, "basis": rw.basis, "recorded_us": rw.recorded_us,
                 "predicted_us": rw.predicted_us, "error_band_pct": rw.error_band_pct,
                 "run_band_pct": rw.run_band_pct, "drawn": pred is not None}
        out["ranks"].append(entry)
        if pred is None:
            continue
        lo, hi, shift = _predicted_window(pred, tls.get(rw.rank), ask, span)
        procs.append((Proc(w, i * PID_RUN + 2 * rw.rank + 2, off.get(rw.rank, 0) + shift,
                           origin, lo, hi), pred))
        entry["shift_us"] = us(shift)
    return out, procs


def _predicted_window(pred: Timeline, rec: Timeline | None, ask: TraceAsk,
                      span: tuple[int, int, list[int]] | None
                      ) -> tuple[int | None, int | None, int]:
    """The predicted rank's window (its clock) and the shift that lines its first drawn step
    up with the recorded one's (host step ranges of the same step number)."""
    if span is None:
        win = None if ask.full else window_of(pred)
        return (None, None, 0) if win is None else (win[0], win[1], 0)
    rows = np.nonzero(np.isin(pred.step_num, span[2]))[0]
    if rows.size == 0:
        return None, None, 0
    lo, hi = int(pred.step_start_ns[rows].min()), int(pred.step_end_ns[rows].max())
    shift = 0
    if rec is not None:
        first = np.nonzero(rec.step_num == span[2][0])[0]
        here = np.nonzero(pred.step_num == span[2][0])[0]
        if first.size and here.size:
            shift = int(rec.step_start_ns[first[0]]) - int(pred.step_start_ns[here[0]])
    nxt = pred.step_start_ns[pred.step_start_ns > hi]  # through the last step's GPU work
    return lo, int(nxt.min()) if nxt.size else int(pred.gpu_end_ns.max(initial=hi)), shift


def _predicted_steps(p: Proc, pred: Timeline) -> None:
    """The predicted rank's step ranges (host, moved with the replayed calls)."""
    keep = p.within(pred.step_start_ns, pred.step_end_ns)
    s, e = pred.step_start_ns[keep], pred.step_end_ns[keep]
    nums = pred.step_num[keep].tolist()
    p.draw(("steps",), "profplug: steps (host ranges, predicted)", 0, "step", s, e,
           [f'"step {n}"' for n in nums], [f'{{"step":{n}}}' for n in nums], "generic_work")


def _notes(rep: Report, xr: CrossRankResult | None, wi: WhatIfResult | None, ask: TraceAsk,
           span: tuple[int, int, list[int]] | None) -> list[str]:
    """What the file lacks, and why."""
    notes = []
    if not rep.timelines:
        notes.append("no recorded GPU or host tracks: the report was made without its "
                     "timelines")
    if xr is None:
        notes.append("no cross-rank analysis (one rank, no NCCL kernel, or "
                     "--no-cross-rank): no clock alignment, pairs or critical path")
    if wi is None:
        notes.append("no what-if (--no-whatif, or not run by default on a big run: "
                     "--whatif runs it): no predicted processes")
    elif wi.predicted is None and wi.calibrated_on_us is not None:
        notes.append("no predicted processes: the what-if at an unprofiled step "
                     "(--unprofiled) replays a host of another speed than the one recorded")
    elif wi.predicted is None:
        notes.append("the what-if ran without keeping its predicted timelines")
    elif not ask.full:
        notes.append("the predicted processes draw the replay's GPU ops and step ranges; "
                     "--trace-full adds their host calls")
    if ask.steps is not None and span is None:
        notes.append("--trace-steps: the run has no complete steps; the analyzed window "
                     "is drawn")
    if ask.steps is not None:
        notes.append("only the steps drawn: the overlay's idle is that of those steps, not "
                     "the report's")
    return notes
