"""profplug's own tracks in a rank's process: the idle gaps by cause, the NCCL peer wait, the
steps (outliers marked) and the critical path; and the flow arrows between ranks (matched
send -> recv and collectives, the critical path's hops).

Every figure comes from the analyses' own objects, formatted only: the gaps are the stall
report's (``RankResult.gaps``, each with its cause and the sync call it is charged to), the
peer wait and the hand-off points the cross-rank bubbles' (``RankBubbles``), the steps the
step analysis's (``StepStats``, ``RankResult.step_starts_ns``), the critical path the
cross-rank walk's segments (``CrossRankResult.paths``), the pairs the matching's
(``CrossRankResult.matched``). A slice is coloured by its quantity's colour on the HTML
pages (``render.palette``): Chrome's ``cname`` takes only its reserved names, so the nearest
of them, and the hex in the slice's args (``color``).
"""

from __future__ import annotations

from itertools import pairwise
from types import MappingProxyType
from typing import Any

import numpy as np
from profplug.analyzers.core.timeline import Timeline, groups
from profplug.analyzers.crossrank.bubbles import RankBubbles
from profplug.analyzers.graph.matching import COLL_RULES, RULES
from profplug.analyzers.graph.pathgraph import CATEGORIES
from profplug.analyzers.render.chrometrace.tracks import SORT_OWN, Proc, gpu_key
from profplug.analyzers.render.chrometrace.writer import enc, us3
from profplug.analyzers.render.palette import COLORS
from profplug.analyzers.stalls.callsites import UNANNOTATED
from profplug.analyzers.stalls.gaps import CAUSES, Spans
from profplug.analyzers.stalls.rank import RankResult

# Chrome's reserved colour names (catapult's color_scheme.js), the only ``cname`` it takes
RESERVED = MappingProxyType({
    "thread_state_uninterruptible": (182, 125, 143), "thread_state_iowait": (255, 140, 0),
    "thread_state_running": (126, 200, 148), "thread_state_runnable": (133, 160, 210),
    "thread_state_unknown": (199, 155, 125), "background_memory_dump": (0, 180, 180),
    "generic_work": (125, 125, 125), "good": (0, 125, 0), "bad": (180, 125, 0),
    "terrible": (180, 0, 0), "black": (0, 0, 0), "yellow": (255, 255, 0),
    "olive": (100, 100, 0), "rail_response": (67, 135, 253), "rail_animation": (244, 74, 63),
    "rail_idle": (238, 142, 0), "rail_load": (13, 168, 97), "startup": (230, 230, 0),
    "heap_dump_stack_frame": (128, 128, 128), "cq_build_failed": (238, 136, 136),
})
# the critical path's categories as the palette's quantities
PATH_COLOR = MappingProxyType({"compute": "compute", "transfer": "transfer", "peer_wait": "peer_wait",
                               "host_launch": "host_bound", "device_sync": "device_sync",
                               "event_sync": "event_sync", "other": "other"})
OUTLIER_CNAME = "terrible"
FLOW_CAT = "profplug"


def cname(key: str) -> str:
    """The reserved name nearest (RGB distance) to the palette colour of ``key``."""
    h = COLORS[key].lstrip("#")
    rgb = tuple(int(h[i:i + 2], 16) for i in (0, 2, 4))
    # a grey among the greys: a tinted name would read as a hue the palette does not mean
    pool = [n for n in RESERVED if _grey(RESERVED[n])] if _grey(rgb) else list(RESERVED)
    return min(pool, key=lambda n: sum((a - b) ** 2 for a, b in
                                       zip(RESERVED[n], rgb, strict=True)))


def _grey(rgb: tuple[int, ...]) -> bool:
    return max(rgb) - min(rgb) < 16


def _gap_rows(p: Proc, r: RankResult) -> list[tuple[int, int, np.ndarray]]:
    """(device, cause id, rows of ``r.gaps``) of every gap the window holds."""
    g = r.gaps
    keep = p.inside(g.start_ns, g.end_ns)
    out = []
    for dev, idx in groups(g.device):
        idx = idx[keep[idx]]
        out += [(dev, k, idx[g.cause[idx] == k]) for k in range(len(CAUSES))]
    return out


def idle_drawn(p: Proc, r: RankResult) -> dict[int, dict[str, int]]:
    """The idle (ns) :func:`draw_gaps` draws, per device and cause: the metadata's figure."""
    g = r.gaps
    out: dict[int, dict[str, int]] = {}
    for dev, k, sel in _gap_rows(p, r):
        out.setdefault(dev, dict.fromkeys(CAUSES, 0))[CAUSES[k]] = \
            int((g.end_ns[sel] - g.start_ns[sel]).sum())
    return out


def draw_gaps(p: Proc, r: RankResult) -> None:
    """Each idle gap in the window as a slice ``cause @ call site`` (the API when the site is
    unknown) on the device's idle track, its idle in args."""
    g = r.gaps
    for dev, k, sel in _gap_rows(p, r):
        c = CAUSES[k]
        if sel.size:
            dur = g.end_ns[sel] - g.start_ns[sel]
            labels = _call_labels(r, c, np.unique(g.call[sel]).tolist())
            head = f'{{"cause":"{c}","color":"{COLORS[c]}","idle_ns":'
            calls = g.call[sel].tolist()
            names = [labels[x][0] for x in calls]
            args = [f'{head}{d},"idle_us":{u},{labels[x][1]}}}'
                    for d, u, x in zip(dur.tolist(), us3(dur), calls, strict=True)]
            p.draw(("idle", dev), f"profplug: GPU {dev} idle by cause", SORT_OWN + 10 + dev,
                   f"idle.{c}", g.start_ns[sel], g.end_ns[sel], names, args, cname(c))


def _call_labels(r: RankResult, cause: str, calls: list[int]) -> dict[int, tuple[str, str]]:
    """Per sync call index (-1: none): the slice's name literal and its args' call fields."""
    out = {}
    for i in calls:
        api = r.call_api[i] if 0 <= i < len(r.call_api) else ""
        site = r.call_site[i] if 0 <= i < len(r.call_site) else ""
        where = api if site in ("", UNANNOTATED) else site
        name = f"{cause} @ {where}" if where else cause
        out[i] = (enc(name), f'"api":{enc(api)},"callsite":{enc(site)}')
    return out


def draw_waits(p: Proc, waits: Spans) -> None:
    """The NCCL kernels' peer wait (comm less transfer), per device."""
    keep = p.inside(waits.start_ns, waits.end_ns)
    for dev, idx in groups(waits.device):
        idx = idx[keep[idx]]
        p.draw(("wait", dev), f"profplug: GPU {dev} NCCL peer wait", SORT_OWN + 500 + dev,
               "peer_wait", waits.start_ns[idx], waits.end_ns[idx],
               [enc("NCCL peer wait")] * int(idx.size),
               [f'{{"color":"{COLORS["peer_wait"]}"}}'] * int(idx.size), cname("peer_wait"))


def draw_steps(p: Proc, r: RankResult) -> None:
    """Each complete step's GPU span (its first op to the next step's), named by its step
    number; the outlier steps (left out of the step time) marked."""
    s, e, st = r.step_starts_ns, r.step_ends_ns, r.steps
    if s.size == 0 or st is None:
        return
    nums = [st.number(i) for i in range(s.size)]
    per = st.period_us_per_step
    out = np.zeros(s.size, dtype=bool)
    out[[i for i in st.outlier_steps if i < s.size]] = True
    keep = p.within(s, e)
    for flag, label, cn in ((False, "step {}", "generic_work"),
                            (True, "step {} (outlier)", OUTLIER_CNAME)):
        idx = np.nonzero((out == flag) & keep)[0].tolist()
        args = [f'{{"step":{nums[i]},"period_us":{per[i] if i < len(per) else "null"},'
                f'"outlier":{"true" if flag else "false"},"step_time_us":{st.period_us}}}'
                for i in idx]
        p.draw(("steps",), "profplug: steps", SORT_OWN, "step", s[idx], e[idx],
               [enc(label.format(nums[i])) for i in idx], args, cn)


def draw_path(procs: dict[int, Proc], ranks: list[int], paths: list[Any]) -> None:
    """Each step's critical path (aligned clock) as slices on its ranks' path tracks, by
    category, and an arrow where it passes from one rank to another. A step's path may reach
    back into the step before's (it starts at the end of the latest op the step launched):
    such steps go on a second track of the rank (``lanes``), so no slice of a track overlaps
    another."""
    segs = [(k, sg) for k, pth in enumerate(paths) for sg in pth.segments
            if ranks[sg.pos] in procs]
    lane = _lanes(segs, ranks)
    for (rank, ln, cat), rows in _by(segs, lambda kv: (ranks[kv[1].pos],
                                                       lane[(ranks[kv[1].pos], kv[0])],
                                                       kv[1].cat)).items():
        p = procs[rank]
        s = np.array([sg.start for _, sg in rows], dtype=np.int64) - p.offset_ns
        e = np.array([sg.end for _, sg in rows], dtype=np.int64) - p.offset_ns
        keep = p.inside(s, e)
        name, key = CATEGORIES[cat], PATH_COLOR[CATEGORIES[cat]]
        args = [f'{{"category":"{name}","step":{_num(paths[k].step)},'
                f'"color":"{COLORS[key]}"}}' for (k, _), ok in zip(rows, keep, strict=True)
                if ok]
        p.draw(("path", ln), "profplug: critical path" + (f" ({ln + 1})" if ln else ""),
               SORT_OWN + 1 + ln, f"critical.{name}", s[keep], e[keep],
               [enc(f"critical path: {name}")] * len(args), args, cname(key))
    hops = []  # (rank, its thread, its end; rank, its thread, its start) on rank clocks
    for k, pth in enumerate(paths):
        order = sorted(pth.segments, key=lambda sg: (sg.start, sg.end))
        for a, b in pairwise(order):
            ra, rb = ranks[a.pos], ranks[b.pos]
            if ra != rb and a.end > a.start and b.end > b.start and ra in procs \
                    and rb in procs:
                hops.append((ra, ("path", lane[(ra, k)]), a.end - 1 - procs[ra].offset_ns,
                             rb, ("path", lane[(rb, k)]), b.start - procs[rb].offset_ns))
    _flows(procs, "critical path", hops)


def _lanes(segs: list[tuple[int, Any]], ranks: list[int]) -> dict[tuple[int, int], int]:
    """Per (rank, step), the first of the rank's path tracks whose last step ends before
    this step's segments on the rank begin (greedy interval partitioning)."""
    span: dict[tuple[int, int], list[int]] = {}
    for k, sg in segs:
        lo_hi = span.setdefault((ranks[sg.pos], k), [sg.start, sg.end])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], sg.start), max(lo_hi[1], sg.end)
    ends: dict[int, list[int]] = {}
    out = {}
    for (rank, k), (lo, hi) in sorted(span.items(), key=lambda kv: kv[1][0]):
        last = ends.setdefault(rank, [])
        ln = next((i for i, end in enumerate(last) if end <= lo), len(last))
        last[ln:ln + 1] = [hi]
        out[(rank, k)] = ln
    return out


def _num(step: int | None) -> str:
    return "null" if step is None else str(step)


def _by(rows: list[Any], key: Any) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for x in rows:
        out.setdefault(key(x), []).append(x)
    return out


def draw_matched(procs: dict[int, Proc], tls: dict[int, Timeline],
                 bubbles: dict[int, RankBubbles], m: Any) -> None:
    """An arrow per matched send -> recv (sender's kernel to the receiver's), and per pair of
    a collective's members or of a pair whose direction the trace does not say (lower rank
    to higher), from where each kernel stopped waiting (the bubbles' hand-off points, as the
    page's swimlane draws them)."""
    coll = np.isin(m.e_rule, [RULES.index(r) for r in COLL_RULES])
    lower = (m.e_dir == 0) & (m.e_pos < m.f_pos)
    for name, sel in (("send -> recv", m.e_dir == 1), ("collective", lower & coll),
                      ("NCCL pair (direction unknown)", lower & ~coll)):
        rows = np.nonzero(sel)[0]
        sides = []
        for pos, op in ((m.e_pos[rows], m.e_op[rows]), (m.f_pos[rows], m.f_op[rows])):
            ranks = np.array(m.ranks, dtype=np.int64)[pos.astype(np.int64)]
            ts = np.zeros(rows.size, dtype=np.int64)
            keys: list[tuple[object, ...] | None] = [None] * int(rows.size)
            for rank, idx in groups(ranks):
                if rank in procs:
                    tl, ops = tls[rank], op[idx].astype(np.int64)
                    ts[idx] = _handoffs(tl, bubbles.get(rank), ops)
                    for i, d, st in zip(idx.tolist(), tl.gpu_device[ops].tolist(),
                                        tl.gpu_stream[ops].tolist(), strict=True):
                        keys[i] = gpu_key(d, st)
            sides.append((ranks.tolist(), keys, ts.tolist()))
        (ra, ka, ta), (rb, kb, tb) = sides
        _flows(procs, name, [x for x in zip(ra, ka, ta, rb, kb, tb, strict=True)
                             if x[1] is not None and x[4] is not None])


def _handoffs(tl: Timeline, b: RankBubbles | None, ops: np.ndarray) -> np.ndarray:
    """Where the NCCL kernels ``ops`` stopped waiting (rank clock), their start when the
    bubbles do not have them."""
    out: np.ndarray = tl.gpu_start_ns[ops].astype(np.int64)
    if b is None or b.kernels.size == 0 or ops.size == 0:
        return out
    order = np.argsort(b.kernels, kind="stable")
    ks = b.kernels[order]
    at = np.minimum(np.searchsorted(ks, ops), ks.size - 1)
    found = ks[at] == ops
    out[found] = b.wait_end[order][at[found]]
    return out


def _flows(procs: dict[int, Proc], name: str, arrows: list[Any]) -> None:
    """Arrows (rank, thread key, rank-clock ns) -> (rank, thread key, ns) whose two ends are
    drawn (their thread exists and the time is inside its window)."""
    cols: list[list[Any]] = [[] for _ in range(6)]
    for ra, ka, ta, rb, kb, tb in arrows:
        pa, pb = procs.get(ra), procs.get(rb)
        if pa is None or pb is None or ka not in pa.tids or kb not in pb.tids \
                or not (pa.has(ta) and pb.has(tb)):
            continue
        for c, v in zip(cols, (pa.pid, pa.tids[ka], pa.at_us(ta), pb.pid, pb.tids[kb],
                               pb.at_us(tb)), strict=True):
            c.append(v)
    if cols[0]:
        w = next(iter(procs.values())).w
        a = (np.array(cols[0]), np.array(cols[1]), np.array(cols[2]))
        b = (np.array(cols[3]), np.array(cols[4]), np.array(cols[5]))
        w.flows(name, FLOW_CAT, a, b)
