"""Terminal table of the cross-rank analysis: bubbles, critical path, drain (80 columns).

Percentages of each rank's GPU window; the critical path's shares of its length.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.render.text import wrap
from profplug.analyzers.steps import stats

if TYPE_CHECKING:
    from profplug.analyzers.crossrank.result import CrossRankResult

WIDTH = 80


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole > 0 else "    -"


def _share(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def _wrap(text: str, first: str = "", indent: str = "  ") -> list[str]:
    return wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent)


def render_crossrank_table(res: CrossRankResult, out: TextIO) -> None:
    w = out.write
    m = res.matching
    rules = ", ".join(f"{k} ({v})" for k, v in m["rules"].items()) or "none"
    w(f"cross-rank · {len(res.ranks)} rank(s) · {m['p2p_pairs']} send/recv pair(s), "
      f"{m['collectives']} collective(s) matched\n")
    for line in _wrap(f"matched by: {rules}", "", "  "):
        w(line + "\n")
    w("\nbubble = idle + NCCL peer wait, % of each rank's GPU window\n")
    w(f"{'rank':>4} {'window us':>11} {'comm':>6} {'transfer':>8} {'wait':>6} {'idle':>6} "
      f"{'bubble':>6} {'/step us':>9}  waits for\n")
    for b in res.bubbles:
        win = b.window_ns
        per = "-"
        if b.steps is not None and b.steps.step_numbers:
            per = f"{stats.center(b.steps.bubble_ns) / 1000:,.1f}"
        waits = ", ".join(f"{r}" for r, _ in sorted(b.waits_for_ns.items(),
                                                     key=lambda kv: -kv[1])[:3]) or "-"
        w(f"{b.rank:>4} {win / 1000:>11,.1f} {_pct(b.comm_ns, win):>6} "
          f"{_pct(b.transfer_ns, win):>8} {_pct(b.wait_ns, win):>6} {_pct(b.idle_ns, win):>6} "
          f"{_pct(b.bubble_ns, win):>6} {per:>9}  {waits}\n")
    cp = res.critical_path
    what = f"{cp.n_steps} step(s)" if cp.basis == Basis.STEP else "the GPU window (no steps)"
    w(f"\ncritical path over {what}, {cp.length_us:,.1f} us\n")
    cats = sorted(((v, k) for k, v in cp.by_category.items() if v), reverse=True)
    for line in _wrap("share of the critical path by category: "
                      + (", ".join(f"{k} {_share(v)}" for v, k in cats) or "-")):
        w(line + "\n")
    ranks = sorted(((v, k) for k, v in cp.by_rank.items()), reverse=True)[:8]
    for line in _wrap("by rank: " + (", ".join(f"{k} {_share(v)}" for v, k in ranks) or "-")):
        w(line + "\n")
    for t in cp.top_callsites[:3]:
        site = t["callsite"].replace("profplug.", "")
        for line in _wrap(f"rank {t['rank']} {t['category']} {_share(t['share'])} "
                          f"({t['steps']} step(s)): {site}", "  ", "    "):
            w(line + "\n")
    w("\ndrain: median host lead (launch -> start), mean launch-queue depth, queue empty\n")
    w(f"{'rank':>4} {'lead us':>10} {'depth':>7} {'empty':>7}\n")
    for d in res.drains:
        lead = "-" if d.lead_p50_ns is None else f"{d.lead_p50_ns / 1000:,.1f}"
        w(f"{d.rank:>4} {lead:>10} {d.depth_mean:>7.2f} {_pct(d.empty_ns, d.window_ns):>7}\n")
    for msg in res.notes:
        for line in _wrap(msg, "note: "):
            w(line + "\n")
    for msg in res.warnings:
        for line in _wrap(msg, "warning: "):
            w(line + "\n")
