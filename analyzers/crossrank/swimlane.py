"""Plot data for the swimlane: a few consecutive steps, every rank on one time axis.

Times in us since the window's start, on the aligned clock. Per rank (one row): GPU ops as
``compute``, NCCL ``transfer`` and ``peer_wait`` parts (``comm_unmatched`` when the kernel
has no partner), idle gaps by cause (the stall report's), matched send -> recv hand-offs
(from the sender's transfer start to the receiver's), the critical path of those steps, and
the launch-queue depth. The window: ``steps`` consecutive complete steps from the middle of
the run (fewer when the ops would pass ``max_ops``). Each rank's part of it is a
``lanes.LaneRow``, made where the rank is (this process, or its worker: docs/scale.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank.bubbles import RankBubbles
from profplug.analyzers.crossrank.critical import CATEGORIES, StepPath
from profplug.analyzers.crossrank.drain import RankDrain
from profplug.analyzers.crossrank.lanes import (
    LANE_STEPS,
    LaneAsk,
    LaneRow,
    gaps_in,
    lane_ask,
    lane_row,
    lane_span,
)
from profplug.analyzers.graph.matching import Matching
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.rank import RankResult

OP_KINDS = ("compute", "transfer", "peer_wait", "comm_unmatched")
MAX_QUEUE_POINTS = 4000  # per rank


@dataclass
class Swimlane:
    """Columnar plot data (lists, JSON-ready); see the module docstring."""

    rows: list[str]
    steps: list[int | None]
    bounds_us: list[float]  # step boundaries in the window
    ops: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # kind -> s, e, y
    gaps: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # cause -> s, e, y
    handoffs: dict[str, list[float]] = field(default_factory=dict)  # x0, y0, x1, y1
    path: dict[str, list[Any]] = field(default_factory=dict)  # s, e, y, cat
    queue: list[dict[str, list[float]]] = field(default_factory=list)  # per row: t, depth
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "steps": self.steps, "bounds": self.bounds_us,
                "ops": self.ops, "gaps": self.gaps, "handoffs": self.handoffs,
                "path": self.path, "queue": self.queue, "notes": self.notes}


def _us(x: np.ndarray, origin: int) -> list[float]:
    rounded: list[float] = np.round((x - origin) / 1000.0, 3).tolist()
    return rounded


def swimlane(timelines: list[Timeline], m: Matching, bubbles: list[RankBubbles],
             stalls: list[RankResult], paths: list[StepPath], drains: list[RankDrain],
             steps: int = LANE_STEPS, max_ops: int | None = None) -> Swimlane | None:
    """The swimlane of ``steps`` steps from the middle of ``paths`` (see the docstring), in
    this process: each rank's row (``lanes``), then :func:`joined_lanes`; ``max_ops``:
    default ``lanes.MAX_OPS``."""
    ask = lane_ask([(p.lo_ns, p.hi_ns) for p in paths], steps, max_ops)
    if ask is None:
        return None
    rows = []
    for i, tl in enumerate(timelines):
        off = int(m.offset_ns[i])
        span = lane_span(tl, off, ask)
        rows.append(lane_row(tl, off, bubbles[i], gaps_in(stalls[i].gaps, off, *span[1:]),
                             drains[i].queue, ask, span))
    return joined_lanes(rows, ask, m, bubbles, paths)


def joined_lanes(rows: list[LaneRow], ask: LaneAsk, m: Matching, bubbles: list[RankBubbles],
                 paths: list[StepPath]) -> Swimlane:
    """The swimlane from the ranks' rows (in ``m.ranks`` order; made here or where the ranks
    were read): the widest candidate window whose ops, summed over the ranks, the page can
    draw (else one step, drawn anyway), each row cut to it."""
    totals = np.sum([r.counts for r in rows], axis=0) if rows else \
        np.zeros(len(ask.windows), dtype=np.int64)
    fits = np.nonzero(totals <= ask.max_ops)[0]
    k = int(fits[0]) if fits.size else len(ask.windows) - 1
    n = len(ask.windows) - k  # steps drawn
    first = max(0, (len(paths) - n) // 2)
    chosen = paths[first:first + n]
    lo, hi = ask.windows[k]
    count = int(totals[k])
    notes = [f"{count:,} GPU ops in one step: drawn anyway (slow to pan)"] \
        if count > ask.max_ops else []
    sw = Swimlane(rows=[f"rank {r}" for r in m.ranks], steps=[p.step for p in chosen],
                  bounds_us=[round((p.lo_ns - lo) / 1000.0, 3) for p in chosen]
                  + [round((hi - lo) / 1000.0, 3)], notes=notes)
    sw.ops = {kind: {"s": [], "e": [], "y": []} for kind in OP_KINDS}
    sw.gaps = {c: {"s": [], "e": [], "y": []} for c in CAUSES}
    for i, r in enumerate(rows):
        s, e, w = r.op_s, r.op_e, r.op_w
        vis = (e > lo) & (s < hi)
        comm, unmatched = r.op_comm, r.op_unmatched
        parts = {"compute": (vis & ~comm, s, e),
                 "peer_wait": (vis & comm & (w > s), s, w),
                 "transfer": (vis & comm & ~unmatched, w, e),
                 "comm_unmatched": (vis & unmatched, s, e)}
        for kind, (sel, a, z) in parts.items():
            d = sw.ops[kind]
            d["s"] += _us(np.maximum(a[sel], lo), lo)
            d["e"] += _us(np.minimum(z[sel], hi), lo)
            d["y"] += [i] * int(sel.sum())
        gs, ge = r.gap_s, r.gap_e
        gv = (ge > lo) & (gs < hi)
        for c_id, c in enumerate(CAUSES):
            sel = gv & (r.gap_cause == c_id)
            sw.gaps[c]["s"] += _us(np.maximum(gs[sel], lo), lo)
            sw.gaps[c]["e"] += _us(np.minimum(ge[sel], hi), lo)
            sw.gaps[c]["y"] += [i] * int(sel.sum())
        qs = (r.q_t >= lo) & (r.q_t < hi)
        t, depth = r.q_t[qs], r.q_depth[qs]
        if t.size > MAX_QUEUE_POINTS:
            keep = np.linspace(0, t.size - 1, MAX_QUEUE_POINTS).astype(np.int64)
            t, depth = t[keep], depth[keep]
        sw.queue.append({"t": [0.0, *_us(t, lo)], "depth": [int(r.start_depth[k]),
                                                            *depth.tolist()]})
    sw.handoffs = _handoffs(m, bubbles, lo, hi)
    sw.path = {"s": [], "e": [], "y": [], "cat": []}
    for p in chosen:
        for seg in p.segments:
            sw.path["s"].append(round((seg.start - lo) / 1000.0, 3))
            sw.path["e"].append(round((seg.end - lo) / 1000.0, 3))
            sw.path["y"].append(seg.pos)
            sw.path["cat"].append(CATEGORIES[seg.cat])
    return sw


def _wait_ends(b: RankBubbles, offset: int, ops: np.ndarray) -> np.ndarray:
    """Where the NCCL kernels ``ops`` (GPU op indices) stop waiting, aligned ns; 0 for an op
    that is not one of the rank's NCCL kernels."""
    out = np.zeros(ops.size, dtype=np.int64)
    if b.kernels.size == 0 or ops.size == 0:
        return out
    order = np.argsort(b.kernels, kind="stable")
    ks = b.kernels[order]
    at = np.minimum(np.searchsorted(ks, ops), ks.size - 1)
    found = ks[at] == ops
    out[found] = b.wait_end[order][at[found]] + offset
    return out


def _handoffs(m: Matching, bubbles: list[RankBubbles], lo: int, hi: int
              ) -> dict[str, list[float]]:
    """Send -> recv of every matched pair inside the window: sender's transfer start to the
    receiver's (aligned us)."""
    sel = np.nonzero(m.e_dir == 1)[0]
    a, c = m.e_pos[sel].astype(np.int64), m.f_pos[sel].astype(np.int64)
    x0, x1 = np.zeros(sel.size, dtype=np.int64), np.zeros(sel.size, dtype=np.int64)
    for pos, b in enumerate(bubbles):
        off = int(m.offset_ns[pos])
        here = a == pos
        x0[here] = _wait_ends(b, off, m.e_op[sel][here].astype(np.int64))
        here = c == pos
        x1[here] = _wait_ends(b, off, m.f_op[sel][here].astype(np.int64))
    inside = (lo <= x0) & (x0 < hi) & (lo <= x1) & (x1 < hi)
    return {"x0": np.round((x0[inside] - lo) / 1000.0, 3).tolist(),
            "y0": a[inside].tolist(),
            "x1": np.round((x1[inside] - lo) / 1000.0, 3).tolist(),
            "y1": c[inside].tolist()}
