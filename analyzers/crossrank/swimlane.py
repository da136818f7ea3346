"""Plot data for the swimlane: a few consecutive steps, every rank on one time axis.

Times in us since the window's start, on the aligned clock. Per rank (one row): GPU ops as
``compute``, NCCL ``transfer`` and ``peer_wait`` parts (``comm_unmatched`` when the kernel
has no partner), idle gaps by cause (the stall report's), matched send -> recv hand-offs
(from the sender's transfer start to the receiver's), the critical path of those steps, and
the launch-queue depth. The window: ``steps`` consecutive complete steps from the middle of
the run (fewer when the ops would pass ``max_ops``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..gaps import CAUSES
from ..stalls import RankStalls
from ..timeline import Timeline
from .bubbles import RankBubbles
from .critical import CATEGORIES, StepPath
from .drain import RankDrain
from .matching import Matching

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
    return np.round((x - origin) / 1000.0, 3).tolist()


def swimlane(timelines: list[Timeline], m: Matching, bubbles: list[RankBubbles],
             stalls: list[RankStalls], paths: list[StepPath], drains: list[RankDrain],
             steps: int = 3, max_ops: int = 40_000) -> Swimlane | None:
    """The swimlane of ``steps`` steps from the middle of ``paths`` (see the docstring)."""
    if not paths:
        return None
    n = min(steps, len(paths))
    notes: list[str] = []
    while True:
        first = max(0, (len(paths) - n) // 2)
        chosen = paths[first:first + n]
        lo = chosen[0].lo_ns
        hi = paths[first + n].lo_ns if first + n < len(paths) else chosen[-1].hi_ns
        count = sum(int(((tl.gpu_end_ns + m.offset_ns[i] > lo)
                         & (tl.gpu_start_ns + m.offset_ns[i] < hi)).sum())
                    for i, tl in enumerate(timelines))
        if count <= max_ops or n == 1:
            break
        n -= 1
    if count > max_ops:
        notes.append(f"{count:,} GPU ops in one step: drawn anyway (slow to pan)")
    sw = Swimlane(rows=[f"rank {r}" for r in m.ranks], steps=[p.step for p in chosen],
                  bounds_us=[round((p.lo_ns - lo) / 1000.0, 3) for p in chosen]
                  + [round((hi - lo) / 1000.0, 3)], notes=notes)
    sw.ops = {k: {"s": [], "e": [], "y": []} for k in OP_KINDS}
    sw.gaps = {c: {"s": [], "e": [], "y": []} for c in CAUSES}
    for i, tl in enumerate(timelines):
        off = int(m.offset_ns[i])
        s, e = tl.gpu_start_ns + off, tl.gpu_end_ns + off
        vis = (e > lo) & (s < hi)
        b = bubbles[i]
        is_comm = np.zeros(tl.n_gpu, dtype=bool)
        is_comm[b.kernels] = True
        w = s.copy()
        w[b.kernels] = b.wait_end + off
        unmatched = np.zeros(tl.n_gpu, dtype=bool)
        unmatched[b.kernels] = ~b.matched
        parts = {"compute": (vis & ~is_comm, s, e),
                 "peer_wait": (vis & is_comm & (w > s), s, w),
                 "transfer": (vis & is_comm & ~unmatched, w, e),
                 "comm_unmatched": (vis & unmatched, s, e)}
        for kind, (sel, a, z) in parts.items():
            d = sw.ops[kind]
            d["s"] += _us(np.maximum(a[sel], lo), lo)
            d["e"] += _us(np.minimum(z[sel], hi), lo)
            d["y"] += [i] * int(sel.sum())
        g = stalls[i].gaps
        gs, ge = g.start_ns + off, g.end_ns + off
        gv = (ge > lo) & (gs < hi)
        for k, c in enumerate(CAUSES):
            sel = gv & (g.cause == k)
            sw.gaps[c]["s"] += _us(np.maximum(gs[sel], lo), lo)
            sw.gaps[c]["e"] += _us(np.minimum(ge[sel], hi), lo)
            sw.gaps[c]["y"] += [i] * int(sel.sum())
        q = drains[i].queue
        qt = q.t + off
        qs = (qt >= lo) & (qt < hi)
        t, depth = qt[qs], q.depth[qs]
        if t.size > MAX_QUEUE_POINTS:
            keep = np.linspace(0, t.size - 1, MAX_QUEUE_POINTS).astype(np.int64)
            t, depth = t[keep], depth[keep]
        start_depth = q.at(np.array([lo - off]))[0]
        sw.queue.append({"t": [0.0, *_us(t, lo)], "depth": [int(start_depth),
                                                            *depth.tolist()]})
    sw.handoffs = _handoffs(timelines, m, bubbles, lo, hi)
    sw.path = {"s": [], "e": [], "y": [], "cat": []}
    for p in chosen:
        for seg in p.segments:
            sw.path["s"].append(round((seg.start - lo) / 1000.0, 3))
            sw.path["e"].append(round((seg.end - lo) / 1000.0, 3))
            sw.path["y"].append(seg.pos)
            sw.path["cat"].append(CATEGORIES[seg.cat])
    return sw


def _handoffs(timelines: list[Timeline], m: Matching, bubbles: list[RankBubbles], lo: int,
              hi: int) -> dict[str, list[float]]:
    """Send -> recv of every matched pair inside the window: sender's transfer start to the
    receiver's (aligned us)."""
    out: dict[str, list[float]] = {"x0": [], "y0": [], "x1": [], "y1": []}
    sel = np.nonzero(m.e_dir == 1)[0]
    wend = []
    for i, b in enumerate(bubbles):
        arr = np.full(timelines[i].n_gpu, 0, dtype=np.int64)
        arr[b.kernels] = b.wait_end + m.offset_ns[i]
        wend.append(arr)
    for k in sel.tolist():
        a, ka, c, kc = (int(m.e_pos[k]), int(m.e_op[k]), int(m.f_pos[k]), int(m.f_op[k]))
        x0, x1 = int(wend[a][ka]), int(wend[c][kc])
        if lo <= x0 < hi and lo <= x1 < hi:
            out["x0"].append(round((x0 - lo) / 1000.0, 3))
            out["y0"].append(a)
            out["x1"].append(round((x1 - lo) / 1000.0, 3))
            out["y1"].append(c)
    return out
