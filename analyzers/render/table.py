"""Terminal table: the headline and the run's warnings, a per-rank summary, then each rank's
sync APIs and costliest call sites.

Fits an 80-column terminal. Percentages are of the rank's GPU window.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.render.text import PrintableWriter, wrap
from profplug.analyzers.stalls.callsites import display_name
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.steps.observer import meta_line
from profplug.analyzers.steps.runstep import run_step, step_words

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import Report
    from profplug.analyzers.stalls.rank import RankResult

WIDTH = 80
TOP_CALLSITES = 5


def _pct(x: float, whole: float) -> str:
    return f"{100.0 * x / whole:5.1f}%" if whole > 0 else "    -"


def _num(x: float) -> str:
    return f"{x:,.1f}"


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else "…" + s[-(n - 1):]


def render_table(rep: Report, out: TextIO) -> None:
    out = PrintableWriter(out)  # type: ignore[assignment]  # renderers only write(); trace strings: no escapes
    w = out.write
    for msg in input_warnings(rep):  # what the input lacks qualifies the finding: first
        w(f"warning: {msg}\n")  # one line each (greppable), as before
    for line in wrap(rep.headline(), WIDTH):  # then the finding
        w(line + "\n")
    for msg in rep.warnings:
        for line in wrap(msg, WIDTH, initial_indent="warning: ",
                                  subsequent_indent="  "):
            w(line + "\n")
    seen = meta_line(rep.meta)  # profplug run: traced vs untraced steps
    if seen:
        w(seen + "\n")
    w("\n")
    sources = sorted({r.source for r in rep.ranks})
    w(f"profplug stall report · {len(rep.ranks)} rank(s) · {'/'.join(sources) or '-'} · "
      f"tolerance {rep.options.tolerance_ns / 1000:g} us\n")
    if not any(r.has_gpu_work for r in rep.ranks):  # the host-only section says the rest
        w("\n")
        return
    w(f"the run's step: {step_words(run_step(rep.ranks))}\n\n")
    w("GPU idle by cause, % of each rank's GPU window\n")
    w(f"{'rank':>4} {'window us':>11} {'step us':>9} {'busy':>6} {'idle':>6} "
      f"{'dev_sync':>8} {'evt_sync':>8} {'host':>6} {'other':>6}\n")
    for r in rep.ranks:
        if not r.has_gpu_work:
            w(f"{r.rank:>4}  no GPU work in this trace\n")
            continue
        win = r.total("window_us")
        ic = r.idle_by_cause_us()
        step = _num(r.steps.period_us) if r.steps and r.steps.n_steps else "-"
        w(f"{r.rank:>4} {_num(win):>11} {step:>9} {_pct(r.total('busy_us'), win):>6} "
          f"{_pct(r.total('idle_us'), win):>6} {_pct(ic['device_sync'], win):>8} "
          f"{_pct(ic['event_sync'], win):>8} {_pct(ic['host_bound'], win):>6} "
          f"{_pct(ic['other'], win):>6}\n")
    for r in rep.ranks:
        _rank_detail(r, out)


def _para(out: TextIO, text: str) -> None:
    """A line of the rank's detail, wrapped to the table's width."""
    out.write(textwrap.fill(text, WIDTH, subsequent_indent="  ", break_long_words=False,
                            break_on_hyphens=False) + "\n")


def input_warnings(rep: Report) -> list[str]:
    """Per rank, the warnings about its trace (truncated, unreadable parts) and the events
    it skipped: shown before the finding, which they qualify."""
    out = []
    for r in rep.ranks:
        out += [f"rank {r.rank}: {m}" for m in r.warnings]
        if r.skipped:
            out.append(f"rank {r.rank}: skipped events: "
                       + ", ".join(f"{k}: {v}" for k, v in r.skipped.items()))
    return out


def _rank_detail(r: RankResult, out: TextIO) -> None:
    w = out.write
    w(f"\n── rank {r.rank} " + "─" * (WIDTH - 9 - len(str(r.rank))) + "\n")
    steps = f"steps: {r.steps_rule}" if r.steps_rule else "no steps"
    w(f"rank from {r.rank_rule}; {len(r.files)} file(s); {steps}\n")
    if not r.has_gpu_work:
        w("no GPU work (kernels, memcpys, memsets) in this rank's trace\n")
    else:
        win = r.total("window_us")
        ic = r.idle_by_cause_us()
        w(f"GPU window {_num(win)} us: compute {_num(r.total('compute_us'))}, comm "
          f"{_num(r.total('comm_us'))}, idle {_num(r.total('idle_us'))}\n")
        w("idle by cause (us): " + ", ".join(f"{c} {_num(ic[c])}" for c in CAUSES) + "\n")
        if r.steps is not None:
            s = r.steps
            if s.n_steps:
                per = ", ".join(f"{c} {_num(v)}" for c, v in s.idle_per_step_us.items() if v)
                _para(out, f"{s.n_steps} steps ({s.n_dropped} incomplete dropped): "
                      f"{_num(s.period_us)} us/step on the GPU, {s.statistic} over "
                      f"{len(s.period_us_per_step) - len(s.outlier_steps)} steps (mean "
                      f"{_num(s.period_us_mean)}; host {_num(s.step_us_mean)}); idle per "
                      f"step: {per or 'none'}")
                for o in s.outliers:
                    _para(out, f"outlier step {o['step']}: {_num(o['step_us'])} us, "
                          f"{o['dominant']} (not in the per-step figures)")
                if s.between_steps_idle_us:
                    _para(out, f"between steps: {_num(s.between_steps_idle_us)} us in "
                          "outlier steps beyond the step time (a pause between groups of "
                          "steps, a slow first step): not step time")
            else:
                w(f"{s.n_dropped} step ranges, none complete\n")
    for reason, n in r.other_reasons.items():
        w(f"other: {n} gap(s): {reason}\n")
    if r.stream_waits:
        n = sum(s.count for s in r.stream_waits)  # GPU-side records
        calls = sum(s.count for s in r.syncs if s.kind == "stream_wait")  # as the sync table
        linked = sum(s.linked for s in r.stream_waits)
        idle = sum(s.gpu_idle_us for s in r.stream_waits)
        rec = f"{calls} calls, {n} with a GPU-side record" if calls != n else str(n)
        _para(out, f"stream waits: {rec} ({linked} linked to their event), stream stalled "
              f"{_num(r.stream_wait_us)} us, of which whole-GPU idle {_num(idle)} us")
        if linked < n:
            record_only = sum(s.record_only for s in r.stream_waits)
            w(f"  {n - linked} wait(s) could not be linked to the awaited event"
              + (f" ({record_only}: record call found, its stream not in the trace)"
                 if record_only else "")
              + "\n")
    if r.syncs:
        w(f"\n{'sync API':<26} {'kind':<11} {'count':>6} {'blocked us':>11} "
          f"{'p99 us':>9} {'idle us':>11}\n")
        for sync in r.syncs:
            w(f"{_clip(sync.api, 26):<26} {sync.kind:<11} {sync.count:>6} "
              f"{_num(sync.host_blocked_us):>11} {_num(sync.host_blocked_p99_us):>9} "
              f"{_num(sync.idle_caused_us):>11}\n")
    if r.callsites:
        w(f"\n{'costliest call sites':<48} {'count':>6} {'idle us':>11} {'/step':>10}\n")
        for c in r.callsites[:TOP_CALLSITES]:
            per = _num(c.idle_per_step_us) if c.idle_per_step_us is not None else "-"
            site = display_name(c.callsite)
            w(f"{_clip(site, 48):<48} {c.count:>6} {_num(c.idle_caused_us):>11} "
              f"{per:>10}\n")
            w(f"  {_clip(c.api, 76)}\n")
    if r.skipped or r.warnings:
        w("input warnings: at the top\n")
