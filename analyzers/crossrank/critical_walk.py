"""The critical path's walk (``critical``), recorded one rank at a time and replayed across
ranks.

A walk step depends only on the node it is at: the node's binding edge gives the segment it
emits, the node it moves to, and what becomes of the call it carries (``critical``'s
rules). So while a rank's graph (``pathgraph.RankGraph``) exists, the steps of every walk
that can pass through the rank are recorded in its :class:`Chain` (from each entry: the end
of a step's last op, and the start of each matched kernel, where a walk arrives from the
partner's rank), down to the lowest step start such a walk can stop at; the graph then
goes. :func:`replay` walks a step across the ranks' chains with its own bound: the same
segments as one walk over the run's whole graph, with one rank's graph in memory at a time
(docs/scale.md).

What a step records that depends on the walk rather than the node is symbolic: a segment
that starts at the walk's bound (``LO``), one whose call is the carried one (``CARRIED``),
and a carried call that stays (``KEEP``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from profplug.analyzers.graph.events import HOST, LAUNCH, PEER, STREAM, STREAM_WAIT, SYNC
from profplug.analyzers.graph.pathgraph import (
    CE,
    CS,
    DEV_SYNC,
    EVT_SYNC,
    HOST_LAUNCH,
    OE,
    OS,
    OTHER,
    TRANSFER,
    RankGraph,
)

LO = -(2**63)  # a segment from the walk's bound
CARRIED = -3  # the call the walk carries
KEEP = -4  # the carried call stays
END, EXIT = -1, -2  # no next node; the next node is on the partner's rank
_NEVER = 2**63 - 1


@dataclass
class Segment:
    pos: int
    cat: int
    start: int
    end: int
    call: int  # API row on that rank, -1 none


@dataclass
class Chain:
    """One rank's recorded walk steps, by node (local id): the segment emitted (category,
    start, end, call; category -1: none, the walk ends), the carried call after it, whether
    the walk ends after it whatever its bound, the next node (``END``, ``EXIT``: the
    partner's start, ``exits``)."""

    pos: int
    n_a: int
    n_o: int
    at: dict[int, int] = field(default_factory=dict)
    cat: list[int] = field(default_factory=list)
    a: list[int] = field(default_factory=list)
    b: list[int] = field(default_factory=list)
    call: list[int] = field(default_factory=list)
    sets: list[int] = field(default_factory=list)
    stop: list[bool] = field(default_factory=list)
    nxt: list[int] = field(default_factory=list)
    exits: dict[int, tuple[int, int]] = field(default_factory=dict)  # step -> (pos, op)
    done_lo: dict[int, int] = field(default_factory=dict)  # node -> recorded down to

    def _record(self, g: RankGraph, v: int) -> int:
        """Node ``v``'s step (``critical``'s rules), recorded."""
        cat, a, b, call, sets, stop, nxt = -1, 0, 0, -1, KEEP, True, END
        k = int(g.bind_kind[v])
        if k >= 0:
            kind, i = g.node(v)
            t = int(g.t[v])
            root = int(g.host_root[v])
            u = int(g.bind_src[v])
            b, stop = t, False
            if root != v:  # a run of host time on the thread: one segment
                cat, a, call, nxt = HOST_LAUNCH, int(g.t[root]), CARRIED, root
            elif kind == OE:
                call, a, nxt = int(g.o_call[i]), int(g.t[u]), u
                if k == PEER:
                    cat, nxt = TRANSFER, EXIT
                    j = u - 2 * g.n_a - 2 * g.n_o - 1
                    self.exits[len(self.cat)] = (int(g.ghost_pos[j]), int(g.ghost_op[j]))
                else:
                    cat = int(g.run_cat[i])
            elif kind == OS:
                call, nxt = int(g.o_call[i]), u
                if k == STREAM or k == STREAM_WAIT:
                    cat, a = OTHER, min(int(g.t[u]), t)
                elif k == LAUNCH:
                    cat, a, sets = HOST_LAUNCH, min(int(g.o_launch[i]), t), call
                else:  # an unlinked op
                    cat, a, call, stop, nxt = OTHER, LO, -1, True, END
            elif kind == CE:
                nxt = u
                if k == SYNC:
                    cat = DEV_SYNC if g.a_dev[i] else EVT_SYNC
                    a, call, sets = min(int(g.t[u]), t), i, -1
                else:
                    blocking = bool(g.sync_call[i])
                    cat, a = HOST_LAUNCH, int(g.t[u])
                    call, sets = (i, i) if blocking else (CARRIED, KEEP)
            elif kind == CS:
                cat, call, nxt = HOST_LAUNCH, CARRIED, u
                if k == HOST:
                    a = min(int(g.t[u]), t)
                else:  # the first call of its thread
                    a, stop, nxt = LO, True, END
            else:
                cat, stop = -1, True
        s = len(self.cat)
        self.at[v] = s
        self.cat.append(cat)
        self.a.append(a)
        self.b.append(b)
        self.call.append(call)
        self.sets.append(sets)
        self.stop.append(stop)
        self.nxt.append(nxt)
        return s

    def trace(self, g: RankGraph, v: int, lo: int) -> None:
        """Record the walk from node ``v`` as far as a walk bounded by ``lo`` goes."""
        path: list[int] = []
        seen: set[int] = set()
        while v not in seen and self.done_lo.get(v, _NEVER) > lo:
            seen.add(v)
            path.append(v)
            s = self.at.get(v)
            if s is None:
                s = self._record(g, v)
            a = lo if self.a[s] == LO else self.a[s]
            if self.cat[s] < 0 or self.stop[s] or self.b[s] <= lo or a <= lo:
                break
            if self.nxt[s] == EXIT:
                break
            v = self.nxt[s]
        for x in path:
            self.done_lo[x] = min(self.done_lo.get(x, _NEVER), lo)

    def os_node(self, op: int) -> int:
        """Op ``op``'s start node (local id)."""
        return 2 * self.n_a + op

    def oe_node(self, op: int) -> int:
        """Op ``op``'s end node (local id)."""
        return 2 * self.n_a + self.n_o + op


def replay(chains: dict[int, Chain], pos: int, v: int, lo: int,
           extend: Callable[[int, int, int], None]) -> list[Segment]:
    """The walk from node ``v`` of rank position ``pos`` back to aligned time ``lo``, over
    the ranks' chains (``extend(pos, node, lo)`` records what a chain lacks: a walk that
    went where no entry foresaw)."""
    segs: list[Segment] = []
    carried = -1
    seen: set[tuple[int, int]] = set()

    def emit(cat: int, a: int, b: int, c: int) -> bool:
        if b <= lo:
            return False
        if b > a:
            last = segs[-1] if segs else None
            if last is not None and last.start == b and last.pos == pos and last.cat == cat \
                    and last.call == c:
                last.start = max(a, lo)
            else:
                segs.append(Segment(pos, cat, max(a, lo), b, c))
        return a > lo

    while (pos, v) not in seen:
        seen.add((pos, v))
        ch = chains[pos]
        if ch.done_lo.get(v, _NEVER) > lo:
            extend(pos, v, lo)
        s = ch.at[v]
        cat = ch.cat[s]
        if cat < 0:
            break
        a = lo if ch.a[s] == LO else ch.a[s]
        call = carried if ch.call[s] == CARRIED else ch.call[s]
        ok = emit(cat, a, ch.b[s], call)
        if ch.sets[s] != KEEP:
            carried = ch.sets[s]
        if ch.stop[s] or not ok:
            break
        nxt = ch.nxt[s]
        if nxt == EXIT:
            pos, op = ch.exits[s]
            v = chains[pos].os_node(op)
        else:
            v = nxt
    return segs
