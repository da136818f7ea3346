"""Communication ops as the host side of a trace describes them: the ``comm_*`` table.

NCCL kernels carry no peer (``ncclDevKernel_SendRecv`` does not even say send or recv), so
what a send, recv or collective was must come from the host side. This module turns the
descriptions the readers find into ``comm_*`` rows (see ``timeline``):

- profplug's ranges (``profplug.analyzers.core.ranges``): ``profplug.send_to_next_pipeline_rank peer=1``,
  ``... recv_from_prev_pipeline_rank_ peer=0``, ``... broadcast_from_last_pipeline_stage
  root=1 group=0,1``; bare names (traces from before the payload) give the kind only;
- torch's annotations around NCCL calls: ``nccl:send 0->1``, ``nccl:recv 1<-0`` (ranks
  within the process group), ``nccl:<collective>`` (``nccl:coalesced`` says nothing);
- NCCL's own NVTX ranges (Nsight): ``ncclSend``, ``ncclRecv``, ``ncclBroadcast``,
  ``ncclAllReduce``..., with the peer when the export carries NCCL's payload;
- torch's ``record_param_comms`` cpu_ops (Kineto, CPU ops recorded): ``Collective name``,
  ``Dst Rank``/``Src Rank`` (global), ``Process Group Ranks``, ``Rank``, ``Seq``.

Annotation-born rows are added by :func:`add_annotation_ops` (both readers call it once the
annotations are in the timeline); ``record_param_comms`` rows by the Kineto reader through
:func:`param_comms`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from profplug.analyzers.core.ranges import BROADCAST, RECV, SEND, split_payload
from profplug.analyzers.core.timeline import (
    COMM_COLL,
    COMM_RECV,
    COMM_SEND,
    COMM_SRC_NCCL_NVTX,
    COMM_SRC_PARAM_COMMS,
    COMM_SRC_PROFPLUG,
    COMM_SRC_TORCH,
    Timeline,
)

_TORCH_P2P = re.compile(r"^nccl:(send|recv)(?: (\d+)(?:->|<-)(\d+))?$")
_TORCH_COLL = re.compile(r"^nccl:([a-z_]+)$")
_NCCL_NVTX = re.compile(r"^nccl(Send|Recv|Broadcast|Bcast|AllReduce|AllGather|ReduceScatter|"
                        r"Reduce|AlltoAll|AllToAll|Gather|Scatter)$")
_NOT_AN_OP = frozenset({"coalesced"})  # the end of a batch: the ops were described before


@dataclass(frozen=True)
class CommDesc:
    """One op as described: kind (``COMM_*``), peer (global rank, -1), group, seq, name."""

    kind: int
    peer: int
    group: tuple[int, ...] | str | None  # str: a large group as "start+stride*size"
    seq: int
    name: str
    src: int


def from_range_name(name: str) -> CommDesc | None:
    """The op a range name describes (profplug, torch ``nccl:``, NCCL NVTX), else None."""
    base, fields = split_payload(name)
    if base in (SEND, RECV):
        peer = fields.get("peer", (-1,))[0]
        return CommDesc(COMM_SEND if base == SEND else COMM_RECV, peer, fields.get("group"),
                        -1, "send" if base == SEND else "recv", COMM_SRC_PROFPLUG)
    if base == BROADCAST:
        return CommDesc(COMM_COLL, fields.get("root", (-1,))[0], fields.get("group"), -1,
                        "broadcast", COMM_SRC_PROFPLUG)
    if name.startswith("nccl:"):
        m = _TORCH_P2P.match(name)
        if m:
            peer = int(m.group(3)) if m.group(3) else -1
            kind = COMM_SEND if m.group(1) == "send" else COMM_RECV
            return CommDesc(kind, peer, None, -1, m.group(1), COMM_SRC_TORCH)
        m = _TORCH_COLL.match(name)
        if m and m.group(1) not in _NOT_AN_OP:
            return CommDesc(COMM_COLL, -1, None, -1, m.group(1), COMM_SRC_TORCH)
        return None
    m = _NCCL_NVTX.match(name)
    if m:
        op = m.group(1)
        kind = {"Send": COMM_SEND, "Recv": COMM_RECV}.get(op, COMM_COLL)
        return CommDesc(kind, -1, None, -1, _snake(op), COMM_SRC_NCCL_NVTX)
    return None


def _snake(op: str) -> str:
    return {"Bcast": "broadcast", "AlltoAll": "all_to_all", "AllToAll": "all_to_all"}.get(
        op, re.sub(r"(?<!^)([A-Z])", r"_\1", op).lower())


MAX_RANK = (1 << 31) - 1  # ranks fit int32; a larger number in a description is no rank
MAX_SEQ = 1 << 62  # a Seq beyond this is no sequence number (comm_seq is int64)
LISTED_GROUP = 64  # a group rebuilt from start/stride/size is listed up to this size; a
# larger one is written as "start+stride*size" (so a small event cannot make a huge name)


def _ints(v: Any) -> list[int] | None:
    """``"[0, 1, 2]"`` or ``[0, 1, 2]`` -> [0, 1, 2]; None when truncated or unreadable (or
    a member is not a rank)."""
    if isinstance(v, list):
        items = v
    elif isinstance(v, str) and "..." not in v:
        items = [x for x in re.split(r"[\s,\[\]]+", v) if x]
    else:
        return None
    out = [_int(x, 0, MAX_RANK) for x in items]
    ranks = [x for x in out if x is not None]
    return ranks if len(ranks) == len(out) else None


def _int(v: Any, lo: int = -MAX_RANK, hi: int = MAX_RANK) -> int | None:
    """An int (or a decimal string of one) within [lo, hi], else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        t = v.strip().strip('"')
        if not _DECIMAL.match(t):
            return None
        v = int(t)
    if isinstance(v, int):
        return v if lo <= v <= hi else None
    return None


def _rebuilt_group(start: int | None, stride: int | None, size: int | None
                   ) -> list[int] | str | None:
    """A group from its first global rank, stride and size (torch truncates the list over
    30 ranks): listed up to LISTED_GROUP members, else ``"start+stride*size"``."""
    if start is None or not stride or not size or start < 0 or size < 0:
        return None
    if not 0 <= start + stride * (size - 1) <= MAX_RANK:
        return None
    if size <= LISTED_GROUP:
        return [start + stride * i for i in range(size)]
    return f"{start}+{stride}*{size}"


def _member(group: tuple[int, ...] | str | None, local: int) -> int:
    """The global rank of the group's ``local``-th member (``local`` when unknown)."""
    m = _RANGE_GROUP.match(group) if isinstance(group, str) else None
    if m is not None:
        start, stride, size = (int(x) for x in m.groups())
        return start + stride * local if local < size else local
    if isinstance(group, tuple) and local < len(group):
        return group[local]
    return local


def group_members(group: str, ranks: Iterable[int]) -> list[int]:
    """The ``ranks`` that are members of ``group`` (a ``comm_group`` text: ``"0,1,2"`` or
    ``"start+stride*size"``)."""
    m = _RANGE_GROUP.match(group)
    if m is None:
        listed = {int(x) for x in group.split(",") if x}
        return [r for r in ranks if r in listed]
    start, stride, size = (int(x) for x in m.groups())
    return [r for r in ranks
            if (r - start) % stride == 0 and 0 <= (r - start) // stride < size]


_RANGE_GROUP = re.compile(r"^(-?[0-9]+)\+(-?[0-9]+)\*([0-9]+)$")
_DECIMAL = re.compile(r"^-?[0-9]{1,19}$")


def param_comms(args: Any) -> CommDesc | None:
    """The op a ``record_param_comms`` cpu_op describes (its decoded ``args``), else None."""
    name = getattr(args, "collective_name", None)
    if not isinstance(name, str) or not name.strip('"'):
        return None
    name = name.strip('"').lower()
    if name in _NOT_AN_OP:
        return None
    group: list[int] | str | None = _ints(getattr(args, "group_ranks", None))
    if group is None:  # truncated list (over 30 ranks): rebuild from start and stride
        group = _rebuilt_group(_int(getattr(args, "rank_start", None)),
                               _int(getattr(args, "rank_stride", None)),
                               _int(getattr(args, "group_size", None), 0))
    seq = _int(getattr(args, "seq", None), -MAX_SEQ, MAX_SEQ)
    seq = -1 if seq is None else seq
    grp = group if isinstance(group, str) else tuple(group) if group else None
    if name in ("send", "recv"):
        peer = _int(getattr(args, "dst_rank" if name == "send" else "src_rank", None), 0)
        local = _int(getattr(args, "comm_rank", None), 0)
        if peer is None and local is not None:
            peer = _member(grp, local)
        return CommDesc(COMM_SEND if name == "send" else COMM_RECV,
                        -1 if peer is None else peer, grp, seq, name, COMM_SRC_PARAM_COMMS)
    return CommDesc(COMM_COLL, -1, grp, seq, name, COMM_SRC_PARAM_COMMS)


def group_text(group: tuple[int, ...] | list[int] | str | None) -> str | None:
    """The ``comm_group`` symbol of a group: its global ranks joined by commas (a large
    rebuilt group: its ``"start+stride*size"`` text)."""
    if isinstance(group, str):
        return group
    return ",".join(map(str, group)) if group else None


def add_annotation_ops(tl: Timeline, peers: dict[int, int] | None = None) -> None:
    """Append a ``comm_*`` row for every annotation that describes a communication op.

    ``peers``: annotation row -> peer rank, for sources whose peer is not in the name
    (NCCL's NVTX payload in an Nsight export).
    """
    if tl.ann_name.size == 0:
        return
    uniq = np.unique(tl.ann_name)
    descs = {int(n): d for n in uniq if (d := from_range_name(tl.names[int(n)])) is not None}
    if not descs:
        return
    rows = np.nonzero(np.isin(tl.ann_name, np.fromiter(descs, dtype=np.int32)))[0]
    index = {s: i for i, s in enumerate(tl.names)}

    def sym(s: str | None) -> int:
        if s is None:
            return -1
        i = index.get(s)
        if i is None:
            i = index[s] = len(tl.names)
            tl.names.append(s)
        return i

    lut = {n: (d.kind, d.peer, sym(group_text(d.group)), d.seq, sym(d.name), d.src)
           for n, d in descs.items()}
    cols = np.array([lut[int(n)] for n in tl.ann_name[rows]], dtype=np.int64).reshape(-1, 6)
    peer = cols[:, 1].copy()
    if peers:
        for k, r in enumerate(rows.tolist()):
            if r in peers and peer[k] < 0:
                peer[k] = peers[r]
    _append(tl, tl.ann_start_ns[rows], tl.ann_end_ns[rows], tl.ann_tid[rows], cols[:, 0],
            peer, cols[:, 2], cols[:, 3], cols[:, 4], cols[:, 5])


def _append(tl: Timeline, start: np.ndarray, end: np.ndarray, tid: np.ndarray,
            kind: np.ndarray, peer: np.ndarray, group: np.ndarray, seq: np.ndarray,
            name: np.ndarray, src: np.ndarray) -> None:
    new = {"comm_start_ns": start, "comm_end_ns": end, "comm_tid": tid, "comm_kind": kind,
           "comm_peer": peer, "comm_group": group, "comm_seq": seq, "comm_name": name,
           "comm_src": src}
    for k, v in new.items():
        old = getattr(tl, k)
        setattr(tl, k, np.concatenate([old, np.asarray(v, dtype=old.dtype)]))
