"""NCCL kernels matched across N ranks: which kernel on which rank each one waits for.

A NCCL kernel's duration includes waiting for its peers, and its name does not say which
peer (``ncclDevKernel_SendRecv`` does not even say send or recv). Matching uses what the
host side of the trace says (the ``comm_*`` table, ``commops``):

1. **Describe each kernel.** A NCCL kernel's launching call (same correlation id) sits on a
   host thread at time t. The ``comm_*`` rows of that thread that start after the previous
   NCCL launch on the thread and at or before t describe it (profplug's range encloses the
   launch; a batched ``record_param_comms`` or NCCL ``ncclSend`` range precedes it); rows
   of a kind that does not fit the kernel (a send for a broadcast kernel) are ignored. Of
   the fitting rows, the best source is used: a known peer first, then profplug range >
   record_param_comms > torch ``nccl:`` annotation > NCCL NVTX range.
2. **Peers of sends and recvs** (``P2P_RULES``, strongest first): the peer the description
   gives (``peer=R`` in profplug's range; ``Dst Rank``/``Src Rank`` of record_param_comms;
   ``nccl:send A->B``; NCCL's NVTX payload); with the direction but no peer (traces from
   before profplug put the peer in the name): the only other rank when the run has two,
   else the ring neighbour in rank order (send -> next, recv -> previous; assumed, and said
   so); with nothing (no description at all) and two ranks: the k-th such kernel of one name
   on one rank with the k-th on the other.
3. **Pairs.** Sends from a to b and recvs on b from a are paired in launch order: the k-th
   with the k-th (NCCL delivers the messages between two ranks in order). Extra ones are
   left unmatched and counted.
4. **Collectives** (``COLL_RULES``): by group and sequence number when every member's
   description has them; else the k-th collective of a group on each member; with no group
   (older traces, NCCL NVTX without payload): the k-th kernel of the same name on every rank
   that has one.
5. **Clocks** (``analyzers/readers/clocks.py``). Ranks from one Nsight report share its clock.
   Separate files are aligned by the median end difference of matched kernels (both sides
   of a transfer end together), rank by rank from the lowest; the offsets are reported, and
   the residual when the clocks differ. Ranks no matched kernel links, on different clocks
   (Kineto and Nsight, a Kineto file without a base), are not joined (``clock_refused``).

The result is a :class:`Matching`: edges between kernels (both directions, with the rule),
the clock offsets (aligned time = rank time + offset), per-rank counts and notes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import COMM_COLL, COMM_RECV, COMM_SEND, Timeline
from profplug.analyzers.graph.coupling import Edges, couple, couple_two
from profplug.analyzers.graph.kernel_descriptions import Op, RankKernels, base_name, describes
from profplug.analyzers.readers.clocks import MEDIAN_END, ONE_REPORT, SINGLE, align
from profplug.analyzers.readers.commops import group_members

R_DESCRIBED = ("peer in profplug range", "record_param_comms peer",
               "torch nccl: annotation peer", "NCCL NVTX payload peer")
R_OTHER_RANK = "direction known, peer = the only other rank"
R_RING = "direction known, peer = ring neighbour (assumed)"
R_ORDER = "k-th kernel of the same name on the two ranks"
P2P_RULES = (*R_DESCRIBED, R_OTHER_RANK, R_RING, R_ORDER)
C_SEQ = "collective: group and sequence number"
C_GROUP = "collective: k-th of its group"
C_NAME = "collective: k-th kernel of the same name on every rank"
COLL_RULES = (C_SEQ, C_GROUP, C_NAME)
RULES = (*P2P_RULES, *COLL_RULES)
CLOCK_ONE = ONE_REPORT
CLOCK_SINGLE = SINGLE
CLOCK_MEDIAN = MEDIAN_END


@dataclass
class Matching:
    """Kernels coupled across ranks. ``e_*``: one row per (kernel, partner) edge, both ways."""

    ranks: list[int]  # rank per timeline position
    e_pos: np.ndarray  # timeline position of the kernel
    e_op: np.ndarray  # its GPU op index
    f_pos: np.ndarray  # the partner's timeline position
    f_op: np.ndarray  # the partner's GPU op index
    e_rule: np.ndarray  # index into RULES
    e_dir: np.ndarray  # 1: the kernel sends to its partner, -1: receives from it, 0: other
    offset_ns: np.ndarray  # per position: aligned time = rank time + offset
    clock_rule: str
    comm_ops: list[np.ndarray]  # per position: GPU op indices of every NCCL/RCCL kernel
    rule_counts: dict[str, int] = field(default_factory=dict)  # pairs / collectives by rule
    unmatched: list[int] = field(default_factory=list)  # per position: kernels without edge
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    clock_refused: str | None = None  # ranks on clocks that cannot be aligned (clocks.py)
    clock_residual_ns: int = 0  # the largest residual of a clock alignment

    def rank_rule(self, pos: int) -> str:
        """The rule that matched most of this rank's kernels ("unmatched" when none)."""
        sel = self.e_pos == pos
        if not sel.any():
            return "unmatched"
        per_kernel = np.unique(np.stack([self.e_op[sel], self.e_rule[sel]]), axis=1)[1]
        return RULES[int(np.bincount(per_kernel).argmax())]


def match(timelines: list[Timeline], memo: Memo | None = None) -> Matching:
    """Match every NCCL kernel of ``timelines`` (one per rank) with its partners. ``memo``:
    the same timelines (the same objects, in order) are matched once while the caller keeps
    it, and the result (read only) is shared: a report's cross-rank analysis and critical
    path and its what-if match once, not twice."""
    if memo is None:
        return _match(timelines, None)
    return memo.get("matching", tuple(timelines), lambda: _match(timelines, memo))


def _match(timelines: list[Timeline], memo: Memo | None) -> Matching:
    ranks = [tl.rank for tl in timelines]
    rs = [RankKernels(i, tl, memo) for i, tl in enumerate(timelines)]
    pos_of = {r: i for i, r in enumerate(ranks)}
    edges = Edges()
    counts: Counter[str] = Counter()
    notes: list[str] = []
    warns: list[str] = []
    _match_p2p(rs, ranks, pos_of, edges, counts, notes, warns)
    _match_coll(rs, ranks, pos_of, edges, counts, notes, warns)
    e = edges.array()
    clock = align(timelines, e)  # clocks.py: offsets, residual, or why not joinable
    notes += clock.notes
    warns += clock.warnings
    paired = [set(e[e[:, 0] == i, 1].tolist()) for i in range(len(rs))]
    unmatched = [int(sum(1 for o in r.kernels.tolist() if o not in paired[i]))
                 for i, r in enumerate(rs)]
    for i, n in enumerate(unmatched):
        if n:
            warns.append(f"rank {ranks[i]}: {n} NCCL kernel(s) not matched with another "
                         "rank's: their time counts as transfer, none as peer wait")
    return Matching(ranks, e[:, 0], e[:, 1], e[:, 2], e[:, 3], e[:, 4], e[:, 5],
                    clock.offset_ns, clock.rule,
                    [r.kernels for r in rs], dict(counts), unmatched, notes, warns,
                    clock_refused=clock.refused, clock_residual_ns=clock.residual_ns)


def _match_p2p(rs: list[RankKernels], ranks: list[int], pos_of: dict[int, int],
               edges: Edges, counts: Counter[str],
               notes: list[str], warns: list[str]) -> None:
    """Pair the sends and recvs (module docstring, 2 and 3): edges, counts by rule, a note
    when a peer was assumed, a warning per lane that does not pair up."""
    for (src, dst), sides in sorted(_p2p_lanes(rs, ranks).items()):
        sends = sorted(sides[COMM_SEND])
        recvs = sorted(sides[COMM_RECV])
        if src not in pos_of or dst not in pos_of:
            warns.append(f"{len(sends) or len(recvs)} p2p op(s) between ranks {src} -> {dst}:"
                         f" rank {dst if src in pos_of else src} is not in the traces")
            continue
        if len(sends) != len(recvs):
            warns.append(f"{len(sends)} send(s) from rank {src} to {dst} vs {len(recvs)} "
                         f"recv(s): the first {min(len(sends), len(recvs))} are paired in "
                         "order, the rest are left unmatched")
        src_pos, dst_pos = pos_of[src], pos_of[dst]
        for (_, send, send_rule), (_, recv, recv_rule) in zip(sends, recvs, strict=False):
            weaker = max(send_rule, recv_rule)  # the weaker of the two sides' rules
            edges.append((src_pos, send, dst_pos, recv, weaker, 1))
            edges.append((dst_pos, recv, src_pos, send, weaker, -1))
            counts[P2P_RULES[weaker]] += 1
    if counts[R_RING]:
        notes.append("some sends/recvs name no peer (a trace from before profplug put the "
                     "peer in its range names): each was taken to go to the next rank in rank"
                     " order and come from the previous one (a pipeline over all ranks)")
    _match_bare(rs, ranks, edges, counts, warns, p2p=True)


# (sender, receiver) -> per direction its ops: (launch order, kernel, index into P2P_RULES)
_Lanes = dict[tuple[int, int], dict[int, list[tuple[int, int, int]]]]


def _p2p_lanes(rs: list[RankKernels], ranks: list[int]) -> _Lanes:
    """The described sends and recvs by (sender, receiver), each with the rule that gave
    its peer; a lone rank's are left out (no other rank to match with: its kernels stay
    unmatched, and a warning says so)."""
    ring = sorted(ranks)
    lanes: _Lanes = defaultdict(lambda: {COMM_SEND: [], COMM_RECV: []})
    rule_index = {rule: i for i, rule in enumerate(P2P_RULES)}
    for r in rs:
        me = ranks[r.pos]
        me_at = ring.index(me)
        for op in r.ops:
            if op.kind == COMM_COLL:
                continue
            found = _p2p_peer(op, ring, me_at)
            if found is None:
                continue
            peer, rule = found
            key = (me, peer) if op.kind == COMM_SEND else (peer, me)
            lanes[key][op.kind].append((op.order, op.kernel, rule_index[rule]))
    return lanes


def _p2p_peer(op: Op, ring: list[int], me_at: int) -> tuple[int, str] | None:
    """The peer rank of a send or recv on ``ring[me_at]`` and the rule that gave it (module
    docstring, 2); None on a lone rank."""
    if op.peer >= 0:
        return op.peer, R_DESCRIBED[op.src]
    if len(ring) == 2:
        return ring[1 - me_at], R_OTHER_RANK
    if len(ring) > 2:
        if op.kind == COMM_SEND:
            return ring[(me_at + 1) % len(ring)], R_RING
        return ring[me_at - 1], R_RING
    return None


def _match_bare(rs: list[RankKernels], ranks: list[int], edges: Edges,
                counts: Counter[str], warns: list[str], *, p2p: bool) -> None:
    """Kernels with no description: k-th of one name with k-th (p2p: two ranks only)."""
    by_name: dict[str, dict[int, list[int]]] = defaultdict(dict)
    for r in rs:
        tl = r.tl
        if not r.bare:
            continue
        bare = np.array([o for o, _ in r.bare], dtype=np.int64)
        syms, inv = np.unique(tl.gpu_name[bare], return_inverse=True)  # by name symbol
        of_name: dict[str, list[int]] = defaultdict(list)  # base name of this kind: symbols
        for u, sym in enumerate(syms.tolist()):
            if describes(COMM_SEND, "", kname := base_name(tl.names[sym])) == p2p:
                of_name[kname].append(u)
        for kname, us in of_name.items():  # its kernels, in order
            pick = inv == us[0] if len(us) == 1 else np.isin(inv, us)  # one: no sort
            by_name[kname][r.pos] = bare[pick].tolist()
    for kname, per in sorted(by_name.items()):
        if p2p and (len(rs) != 2 or len(per) != 2):
            n = sum(len(v) for v in per.values())
            warns.append(f"{n} {kname} kernel(s) with nothing saying where they go "
                         f"({len(rs)} ranks): not matched")
            continue
        if not p2p and len(per) < 2:
            continue
        members = sorted(per)
        n = min(len(per[m]) for m in members)
        if any(len(per[m]) != n for m in members):
            warns.append(f"{kname}: " + ", ".join(f"{len(per[m])} on rank {ranks[m]}"
                                                   for m in members)
                         + f": the first {n} are matched in order")
        rule = RULES.index(R_ORDER if p2p else C_NAME)
        if len(members) == 2 and n:  # the usual: every pair's edges at once
            edges.extend(couple_two(members[0], members[1], per[members[0]][:n],
                                    per[members[1]][:n], rule))
            counts[RULES[rule]] += n
            continue
        for k in range(n):
            couple([(m, per[m][k]) for m in members], rule, edges)
            counts[RULES[rule]] += 1


def _match_coll(rs: list[RankKernels], ranks: list[int], pos_of: dict[int, int],
                edges: Edges, counts: Counter[str],
                notes: list[str], warns: list[str]) -> None:
    grouped: dict[str, dict[int, list[Op]]] = defaultdict(lambda: defaultdict(list))
    for r in rs:
        seen: set[int] = set()
        for op in r.ops:
            if op.kind != COMM_COLL or op.kernel in seen:
                continue
            seen.add(op.kernel)
            if op.group is None:
                r.bare.append((op.kernel, op.order))  # matched by kernel name below
            else:
                grouped[op.group][r.pos].append(op)
    for group, per in sorted(grouped.items()):
        members = sorted(per)
        want = {pos_of[x] for x in group_members(group, pos_of)}
        if set(members) != want:
            warns.append(f"collectives of group [{group}] seen on ranks "
                         f"{[ranks[m] for m in members]}, expected {sorted(ranks[m] for m in want)}")
        by_seq = all(op.seq >= 0 for m in members for op in per[m])
        if by_seq:
            inst: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for m in members:
                for op in per[m]:
                    inst[op.seq].append((m, op.kernel))
            groups_ = [inst[s] for s in sorted(inst)]
            rule = RULES.index(C_SEQ)
        else:
            n = min(len(per[m]) for m in members)
            groups_ = [[(m, sorted(per[m], key=lambda o: o.order)[k].kernel) for m in members]
                       for k in range(n)]
            rule = RULES.index(C_GROUP)
        for g in groups_:
            if len(g) >= 2:
                couple(g, rule, edges)
                counts[RULES[rule]] += 1
    _match_bare(rs, ranks, edges, counts, warns, p2p=False)
