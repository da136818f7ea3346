"""The critical path of each step, across ranks: the chain that set the step's end.

All times on the aligned clock (``matching``). A step k spans ``[T_k, E_k]``: ``T_k`` = the
earliest first op of step k on any rank (``steps.step_spans``), ``E_k`` = the latest end of
an op launched in step k on any rank. The walk starts at that op's end and goes back in
time, each move following the dependency that bound the current point, and emitting the
segment it crosses with a category and a rank:

- **at a GPU op's end**: a non-NCCL op emits ``compute`` [start, end]. A NCCL kernel matched
  with partners whose latest start ``w`` (on this clock) lies inside it emits ``transfer``
  [w, end] and jumps to that partner kernel's start, on the partner's rank (its own wait
  [start, w] is slack, not on the path); otherwise it emits ``transfer`` [start, end]. An
  unmatched NCCL kernel emits ``other`` (its wait cannot be told from its transfer).
- **at a GPU op's start** s: of the stream predecessor's end ``p`` and the launching call's
  start ``l``, the later one binds if it is >= s - tol (tol = the stall tolerance, 2 us):
  ``p`` -> the gap [p, s] is ``other`` and the walk goes to the predecessor's end; ``l`` ->
  ``host launch`` [l, s] (launch call and latency) and the walk goes to the host thread at
  l. If both are earlier, the op waited for another stream (a stream wait): the walk goes to
  the latest op of the rank ending in (max(p, l), s + tol], the gap is ``other``.
- **on a host thread at time t** (a launch that bound a GPU op): the host ran since the last
  host-blocking sync call on that thread that returned by t + tol: [its return, t] is ``host
  launch`` (Python and launch work the GPU waited for). The sync itself waited for the latest
  op of the rank ending within it: [that op's end, the sync's return] is ``device sync``
  (cudaDeviceSynchronize & co.) or ``event sync`` (stream/event synchronize, blocking
  memcpy), and the walk goes to that op's end. A sync that waited for nothing is ``host
  launch`` and the walk goes on before it. No sync on the thread: ``host launch`` back to T_k.

The walk stops at T_k (the last segment clipped). ``peer wait`` is 0 on the path by this
definition: a matched kernel's wait is slack (the path goes on through the peer that ended
it); the category is listed so that the split matches the bubble's. Shares are time on the
path / the path's length (they sum to 1). A segment's call site is its host call's (the op's
launching call, the sync call): the innermost enclosing annotation
(``callsites.enclosing``). Without common steps, the whole run is one window (``basis``
"window").
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .. import classify
from ..callsites import enclosing
from ..steps import StepSpans
from ..timeline import Timeline, at_or, groups, launch_calls
from .bubbles import NONE, Binding
from .matching import Matching

CATEGORIES = ("compute", "transfer", "peer_wait", "host_launch", "device_sync", "event_sync",
              "other")
COMPUTE, TRANSFER, PEER_WAIT, HOST, DEV_SYNC, EVT_SYNC, OTHER = range(7)
_END, _START, _HOST = 0, 1, 2


@dataclass
class Segment:
    pos: int
    cat: int
    start: int
    end: int
    call: int  # API row on that rank, -1 none


@dataclass
class StepPath:
    step: int | None  # step number (None: the whole window)
    lo_ns: int
    hi_ns: int
    segments: list[Segment] = field(default_factory=list)


class _RankGraph:
    """One rank's ops and host calls as lists on the aligned clock (fast scalar access)."""

    def __init__(self, tl: Timeline, off: int, b: Binding, comm: np.ndarray) -> None:
        self.S = (tl.gpu_start_ns + off).tolist()
        self.E = (tl.gpu_end_ns + off).tolist()
        order = np.lexsort((tl.gpu_start_ns, tl.gpu_stream, tl.gpu_device))
        prev = np.full(tl.n_gpu, -1, dtype=np.int64)
        if order.size > 1:
            same = (np.diff(tl.gpu_device[order]) == 0) & (np.diff(tl.gpu_stream[order]) == 0)
            prev[order[1:][same]] = order[:-1][same]
        self.prev = prev.tolist()
        calls = launch_calls(tl)
        self.call = calls.tolist()
        self.L = np.where(calls >= 0, at_or(tl.api_start_ns, calls, 0) + off, NONE).tolist()
        self.tid_of_call = tl.api_tid.tolist()
        is_comm = np.zeros(tl.n_gpu, dtype=bool)
        is_comm[comm] = True
        self.comm = is_comm.tolist()
        self.bpos, self.bop = b.pos.tolist(), b.op.tolist()
        self.bstart = np.where(b.start > NONE, b.start + off, NONE).tolist()
        eo = np.argsort(tl.gpu_end_ns, kind="stable")
        self.e_sorted = (tl.gpu_end_ns[eo] + off).tolist()
        self.e_order = eo.tolist()
        kinds = classify.kinds_for_symbols(tl.names)
        ak = kinds[tl.api_name] if tl.api_name.size else np.zeros(0, dtype=np.int8)
        blocking = np.nonzero((ak == classify.DEVICE) | (ak == classify.EVENT))[0]
        self.syncs: dict[int, tuple[list[int], list[int], list[int], list[int]]] = {}
        for t, idx in groups(tl.api_tid, blocking):
            idx = idx[np.argsort(tl.api_end_ns[idx], kind="stable")]
            self.syncs[int(t)] = ((tl.api_end_ns[idx] + off).tolist(),
                                  (tl.api_start_ns[idx] + off).tolist(), idx.tolist(),
                                  ak[idx].tolist())

    def last_end_before(self, t: int, after: int, exclude: int) -> int:
        """The op with the latest end in (after, t] (not ``exclude``), else -1."""
        k = bisect.bisect_right(self.e_sorted, t) - 1
        while k >= 0 and self.e_sorted[k] > after:
            o = self.e_order[k]
            if o != exclude:
                return o
            k -= 1
        return -1


def walk(graphs: list[_RankGraph], pos: int, op: int, lo: int, tol: int) -> list[Segment]:
    """The critical path from op ``op`` of rank position ``pos`` back to time ``lo``."""
    segs: list[Segment] = []
    node, p, o, t, call = _END, pos, op, 0, -1
    seen: set[tuple[int, int]] = set()
    limit = 4 * sum(len(g.S) for g in graphs) + 100

    def emit(cat: int, q: int, a: int, b: int, c: int) -> bool:
        """Record [a, b]; False when the walk has reached ``lo``."""
        if b <= lo:
            return False
        if b > a:  # zero-length moves (a queued op right after its predecessor) leave none
            segs.append(Segment(q, cat, max(a, lo), b, c))
        return a > lo

    for _ in range(limit):
        g = graphs[p]
        if node == _END:
            s, e = g.S[o], g.E[o]
            if g.comm[o] and g.bop[o] >= 0 and s + tol < g.bstart[o] < e:
                if not emit(TRANSFER, p, g.bstart[o], e, g.call[o]):
                    break
                node, p, o = _START, g.bpos[o], g.bop[o]
                continue
            cat = (TRANSFER if g.bop[o] >= 0 else OTHER) if g.comm[o] else COMPUTE
            if not emit(cat, p, s, e, g.call[o]):
                break
            node = _START
        elif node == _START:
            if (p, o) in seen:
                break
            seen.add((p, o))
            s = g.S[o]
            pr = g.prev[o]
            pe = g.E[pr] if pr >= 0 else NONE
            ls = g.L[o]
            if max(pe, ls) < s - tol:  # it waited for another stream
                d = g.last_end_before(s + tol, max(pe, ls), o)
                if d >= 0:
                    if not emit(OTHER, p, min(g.E[d], s), s, g.call[o]):
                        break
                    node, o = _END, d
                    continue
            if pr >= 0 and pe >= ls:
                if not emit(OTHER, p, min(pe, s), s, g.call[o]):
                    break
                node, o = _END, pr
            elif ls > NONE:
                if not emit(HOST, p, ls, s, g.call[o]):
                    break
                node, t, call = _HOST, ls, g.call[o]
            else:
                emit(OTHER, p, lo, s, -1)
                break
        else:  # on the host thread of ``call`` at time t
            ends, starts, idx, kinds = g.syncs.get(g.tid_of_call[call], ([], [], [], []))
            k = bisect.bisect_right(ends, t + tol) - 1
            while k >= 0 and starts[k] >= t:
                k -= 1
            if k < 0:
                emit(HOST, p, lo, t, call)
                break
            if not emit(HOST, p, min(ends[k], t), t, call):
                break
            d = g.last_end_before(ends[k] + tol, starts[k] - tol, -1)
            if d >= 0:
                cat = DEV_SYNC if kinds[k] == classify.DEVICE else EVT_SYNC
                if not emit(cat, p, min(g.E[d], ends[k]), ends[k], idx[k]):
                    break
                node, o = _END, d
            else:
                if not emit(HOST, p, starts[k], ends[k], idx[k]):
                    break
                t, call = starts[k], idx[k]
    return segs


def critical_paths(timelines: list[Timeline], m: Matching, binds: list[Binding],
                   spans: list[StepSpans], tol: int) -> tuple[list[StepPath], str]:
    """The path of every step common to the ranks (or of the whole run); and the basis."""
    graphs = [_RankGraph(tl, int(m.offset_ns[i]), binds[i], m.comm_ops[i])
              for i, tl in enumerate(timelines)]
    windows: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for i, (tl, sp) in enumerate(zip(timelines, spans, strict=True)):
        if sp.rows.size == 0:
            continue
        nums = tl.step_num[sp.rows]
        e_al = tl.gpu_end_ns + m.offset_ns[i]
        for k, num in enumerate(nums.tolist()):
            ops = np.nonzero(sp.op_step == k)[0]
            if ops.size:
                j = int(ops[np.argmax(e_al[ops])])
                windows[num].append((int(sp.span_s[k] + m.offset_ns[i]), int(e_al[j]), i, j))
    with_steps = sum(1 for sp in spans if sp.rows.size)
    paths: list[StepPath] = []
    for num in sorted(windows):
        w = windows[num]
        if len(w) < with_steps:
            continue  # not a complete step on every rank that has steps
        lo = min(x[0] for x in w)
        hi, _, i, j = max((x[1], -x[2], x[2], x[3]) for x in w)
        paths.append(StepPath(num, lo, hi, walk(graphs, i, j, lo, tol)))
    if paths:
        return paths, "step"
    ends = [(g.E[o], i, o) for i, g in enumerate(graphs) for o in range(len(g.E))]
    if not ends:
        return [], "window"
    hi, i, j = max(ends)
    lo = min(min(g.S) for g in graphs if g.S)
    return [StepPath(None, lo, hi, walk(graphs, i, j, lo, tol))], "window"


def call_sites(timelines: list[Timeline], paths: list[StepPath]) -> dict[tuple[int, int], str]:
    """(rank position, API row) -> call site, for every call on the paths."""
    want: dict[int, set[int]] = defaultdict(set)
    for sp in paths:
        for s in sp.segments:
            if s.call >= 0:
                want[s.pos].add(s.call)
    out: dict[tuple[int, int], str] = {}
    for p, calls in want.items():
        tl = timelines[p]
        c = np.array(sorted(calls), dtype=np.int64)
        labels = enclosing(tl, tl.api_start_ns[c], tl.api_end_ns[c], tl.api_tid[c])
        out.update({(p, int(x)): lab for x, lab in zip(c.tolist(), labels, strict=True)})
    return out
