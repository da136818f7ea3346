"""The page's timeline as data: busy spans and idle gaps per (run, rank, device) row, in us
since each run's first GPU op, the step starts, and the view it opens on (a few steps).

GPU time is drawn by quantity, in the palette's colours as on the page's other figures: the
busy spans as ``compute``, over them the rank's NCCL time (``comm``: ``RankResult.comm``;
``transfer`` where the cross-rank analysis split it), over that its NCCL peer wait
(``peer_wait``: ``crossrank.bubbles``' waits), then the idle gaps by cause. ``spans`` holds
the NCCL and peer-wait spans, ``parts`` the quantities drawn (for the legend).

Columnar: one array set for busy spans and one per cause (never one object per gap); the
call-site and API names a gap is charged to go through a string registry (sent once). Each
gap costs the page ~60 bytes (with its busy span), so a page draws at most
``MAX_GAPS_TOTAL`` gaps, shared by its rows (at most ``MAX_GAPS_PER_ROW``, at least
``MIN_GAPS_PER_ROW`` each), the longest of each row; the shorter ones are drawn as GPU work and
a note says how many and how much idle that is. NCCL and peer-wait spans (~30 bytes each)
take half that budget each per row, the longest first. This keeps a page near 2 MB or below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from profplug.analyzers.crossrank.result import CrossRankResult
from profplug.analyzers.stalls.gaps import CAUSES, Spans

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import Report
    from profplug.analyzers.stalls.rank import RankResult

MAX_GAPS_PER_ROW = 5000
MAX_GAPS_TOTAL = 24_000  # ~1.5 MB of page data
MIN_GAPS_PER_ROW = 100
# per device, what a page's report needs of a rank's gaps (``gaps.longest``): the most a row
# draws, and one more (the longest left out: the row's note)
GAPS_KEPT = MAX_GAPS_PER_ROW + 1
VIEW_STEPS = 3  # the timeline opens on this many steps (after the first, often a warm-up)


def row_label(label: str, rank: int) -> str:
    return f"{label} · rank {rank}" if label else f"rank {rank}"


class _Strings:
    """A string registry: call-site/API names repeated thousands of times are sent once."""

    def __init__(self) -> None:
        self.items: list[str] = [""]
        self.ids: dict[str, int] = {"": 0}

    def id(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.items)
            self.items.append(s)
        return self.ids[s]


def gaps_per_row(n_rows: int) -> int:
    """How many gaps each of ``n_rows`` rows may draw (see the module docstring)."""
    return max(MIN_GAPS_PER_ROW, min(MAX_GAPS_PER_ROW, MAX_GAPS_TOTAL // max(n_rows, 1)))


def timeline_data(runs: list[tuple[str, Report]], max_gaps: int | None = None
                  ) -> tuple[dict[str, Any], list[str]]:
    """Busy spans and gaps per (run, rank, device) row, in us since each run's first GPU op;
    ``end``: the latest window end; ``steps``: step starts (:func:`step_starts`); ``view``:
    [start, end] of the opening view.

    Returns the plot data and notes (one per row where gaps were left out). ``max_gaps``:
    gaps drawn per row (default :func:`gaps_per_row`).
    """
    if max_gaps is None:
        max_gaps = gaps_per_row(sum(len(r.windows_ns) for _, rep in runs for r in rep.ranks))
    strings = _Strings()
    rows: list[str] = []
    notes: list[str] = []
    busy: dict[str, list[float]] = {"s": [], "e": [], "y": []}
    gaps: dict[str, dict[str, list[Any]]] = {
        c: {"s": [], "e": [], "y": [], "api": [], "site": []} for c in CAUSES}
    spans: dict[str, dict[str, list[float]]] = {k: {"s": [], "e": [], "y": []}
                                                for k in ("comm", "peer_wait")}
    split = unsplit = False  # some row's NCCL time split into transfer and peer wait / not
    end = 0.0
    for label, rep in runs:
        starts = [w[0] for r in rep.ranks for w in r.windows_ns.values()]
        if not starts:
            continue
        origin = min(starts)
        xr = rep.run.get(CrossRankResult.key)
        for r in rep.ranks:
            waits = _waits(xr, r.rank)
            split = split or waits is not None
            unsplit = unsplit or (waits is None and r.comm.start_ns.size > 0)
            api_ids = [strings.id(a) for a in r.call_api]
            site_ids = [strings.id(s) for s in r.call_site]
            for dev, (ws, we) in sorted(r.windows_ns.items()):
                y = len(rows)
                rows.append(f"{row_label(label, r.rank)} gpu {dev}")
                end = max(end, round((we - origin) / 1000.0, 3))
                note = _row(r, dev, ws, we, origin, y, max_gaps, busy, gaps, api_ids,
                            site_ids)
                if note:
                    notes.append(f"{rows[-1]}: {note}")
                for key, sp in (("comm", r.comm), ("peer_wait", waits)):
                    note = _spans(sp, dev, origin, y, max(1, max_gaps // 2), spans[key], key)
                    if note:
                        notes.append(f"{rows[-1]}: {note}")
    steps = step_starts(runs)
    parts = ["compute"]
    if spans["comm"]["s"]:  # comm and transfer share a colour: the legend names both kinds
        parts += [*(["comm"] if unsplit else []), *(["transfer"] if split else [])]
    if spans["peer_wait"]["s"]:
        parts.append("peer_wait")
    return {"rows": rows, "strings": strings.items, "busy": busy, "spans": spans,
            "parts": parts, "gaps": gaps, "end": end, "steps": steps,
            "view": initial_view(steps) or [0.0, end]}, notes


def _waits(xr: Any, rank: int) -> Spans | None:
    """The rank's NCCL peer-wait spans (the cross-rank analysis), None where it did not run
    on this rank."""
    try:
        return xr.bubble(rank).waits if xr is not None else None
    except (KeyError, AttributeError):
        return None


def _spans(sp: Spans | None, dev: int, origin: int, y: int, cap: int,
           out: dict[str, list[float]], key: str) -> str:
    """Add the spans of ``sp`` on ``dev`` to ``out`` (the ``cap`` longest); a note when some
    were left out."""
    if sp is None or sp.start_ns.size == 0:
        return ""
    sel = np.nonzero(sp.device == dev)[0]
    note = ""
    if sel.size > cap:
        dur = (sp.end_ns - sp.start_ns)[sel]
        keep = np.sort(np.argsort(-dur, kind="stable")[:cap])
        left = np.setdiff1d(np.arange(sel.size), keep)
        below = "compute" if key == "comm" else "NCCL transfer"
        note = (f"drew the {cap:,} longest of {sel.size:,} {key.replace('_', ' ')} spans; the "
                f"other {left.size:,} ({float(dur[left].sum()) / 1000:,.1f} us) are drawn as "
                f"{below}")
        sel = sel[keep]
    sel = sel[np.argsort(sp.start_ns[sel], kind="stable")]
    out["s"] += np.round((sp.start_ns[sel] - origin) / 1000.0, 3).tolist()
    out["e"] += np.round((sp.end_ns[sel] - origin) / 1000.0, 3).tolist()
    out["y"] += [y] * int(sel.size)
    return note


def step_starts(runs: list[tuple[str, Report]]) -> list[float]:
    """The GPU start of each step (us on the page's axis) of the first run's rank with the
    most steps: the step marks of the timeline."""
    rep = runs[0][1] if runs else None
    starts = [w[0] for r in rep.ranks for w in r.windows_ns.values()] if rep else []
    if rep is None or not starts or not rep.ranks:
        return []
    most = max(rep.ranks, key=lambda r: r.step_starts_ns.size)
    rounded: list[float] = np.round((most.step_starts_ns - min(starts)) / 1000.0, 3).tolist()
    return rounded


def initial_view(steps: list[float], n: int = VIEW_STEPS) -> list[float] | None:
    """[start, end] (us) of ``n`` steps: from the second step's start (the first is often a
    warm-up) to ``n`` steps later; None without two steps."""
    first = 1 if len(steps) > n + 1 else 0
    last = min(first + n, len(steps) - 1)
    return [steps[first], steps[last]] if last > first else None


def _row(r: RankResult, dev: int, ws: int, we: int, origin: int, y: int, max_gaps: int,
         busy: dict[str, list[float]], gaps: dict[str, dict[str, list[Any]]],
         api_ids: list[int], site_ids: list[int]) -> str:
    g = r.gaps
    sel = np.nonzero(g.device == dev)[0]
    n_out, ns_out = g.left.get(dev, (0, 0))  # gaps the worker left out (``gaps.longest``)
    note = ""
    if sel.size + n_out > max_gaps:
        dur = (g.end_ns - g.start_ns)[sel]
        keep = np.argsort(-dur, kind="stable")[:max_gaps]
        left = np.setdiff1d(np.arange(sel.size), keep)
        # those left out by the worker are no longer than any it kept
        most = dur[left].max() if left.size else dur.min(initial=0)
        note = (f"drew the {max_gaps:,} longest of {sel.size + n_out:,} gaps; the other "
                f"{left.size + n_out:,} ({float(int(dur[left].sum()) + ns_out) / 1000:,.1f} "
                f"us, each <= {float(most) / 1000:,.3f} us) are drawn as GPU work")
        sel = sel[np.sort(keep)]
    sel = sel[np.argsort(g.start_ns[sel], kind="stable")]
    gs, ge = g.start_ns[sel], g.end_ns[sel]

    def us(a: np.ndarray) -> list[float]:
        rounded: list[float] = np.round((a - origin) / 1000.0, 3).tolist()
        return rounded

    bs = np.concatenate(([ws], ge))
    be = np.concatenate((gs, [we]))
    busy["s"] += us(bs)
    busy["e"] += us(be)
    busy["y"] += [y] * int(bs.size)
    for k, c in enumerate(CAUSES):
        m = g.cause[sel] == k
        if not m.any():
            continue
        call = g.call[sel][m]
        d = gaps[c]
        d["s"] += us(gs[m])
        d["e"] += us(ge[m])
        d["y"] += [y] * int(m.sum())
        d["api"] += [api_ids[i] if i >= 0 else 0 for i in call.tolist()]
        d["site"] += [site_ids[i] if i >= 0 else 0 for i in call.tolist()]
    return note
