"""One rank's NCCL kernels and what its host side says about each (``matching``'s first
step: the module docstring there, 1): a kernel's launching call sits on a host thread at
time t; the ``comm_*`` rows of that thread that start after the previous NCCL launch on the
thread and at or before t, and fit the kernel, describe it; of several, the best source.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import COMM_COLL, Timeline, at_or, groups, launch_calls


@dataclass
class Op:
    """One described op of a kernel: rank position, kernel (GPU op index), what it is."""

    pos: int  # index of the rank in the timelines list
    kernel: int
    kind: int  # COMM_SEND | COMM_RECV | COMM_COLL
    peer: int  # global rank, -1 unknown
    group: str | None
    seq: int
    name: str
    src: int  # comm_src of the description, -1 none
    order: int  # launch order on the rank


def base_name(name: str) -> str:
    """A kernel's name without its arguments."""
    return name.split("(", 1)[0].strip()


def describes(kind: int, name: str, kernel: str) -> bool:
    """Whether a description of ``kind``/``name`` can describe kernel ``kernel`` (a send or
    recv describes a point-to-point kernel; a collective one of its name, or any other
    collective when it is a barrier or unnamed)."""
    kernel_lower = kernel.lower()
    p2p = "sendrecv" in kernel_lower or "_send" in kernel_lower or "_recv" in kernel_lower
    if kind != COMM_COLL:
        return p2p
    if p2p:
        return False
    bare_name = name.replace("_", "").lower()
    return bare_name in ("barrier", "") or bare_name in kernel_lower.replace("_", "")


class RankKernels:
    """One rank's NCCL kernels in launch order (``kernels``: GPU op indices), each one's
    launch time (``launch_ns``: its launching call's start, else its own), host thread
    (``tid``, -1 none) and whether a call launched it (``linked``); their descriptions
    (``ops``) and the kernels none describes (``bare``: (kernel, launch order))."""

    def __init__(self, pos: int, tl: Timeline, memo: Memo | None) -> None:
        self.pos, self.tl = pos, tl
        comm = (
            classify.comm_for_symbols(tl.names, memo)[tl.gpu_name]
            if tl.n_gpu
            else np.zeros(0, dtype=bool)
        )
        kernels = np.nonzero(comm)[0]
        calls = launch_calls(tl, memo)[kernels]
        launch_ns = at_or(tl.api_start_ns, calls, tl.gpu_start_ns[kernels])
        order = np.lexsort((tl.gpu_start_ns[kernels], launch_ns))
        self.kernels = kernels[order]
        self.launch_ns = launch_ns[order]
        self.tid = at_or(tl.api_tid, calls, -1)[order]
        self.linked = (calls >= 0)[order]
        self.ops: list[Op] = []
        self.bare: list[tuple[int, int]] = []  # (kernel, order) with no description
        self._describe()

    def _describe(self) -> None:
        """Each kernel's descriptions (``ops``), or the kernel in ``bare`` when none fits
        (module docstring, 1)."""
        tl = self.tl
        if tl.comm_start_ns.size == 0:  # no description on the rank: every kernel is bare
            self.bare = [(kernel, order) for order, kernel in enumerate(self.kernels.tolist())]
            return
        descriptions = _Descriptions(tl)
        previous_launch_ns: dict[int, int] = {}  # per thread its last NCCL launch
        for order, (kernel, kernel_name, tid, launch_ns, linked) in enumerate(
            zip(
                self.kernels.tolist(),
                tl.gpu_name[self.kernels].tolist(),
                self.tid.tolist(),
                self.launch_ns.tolist(),
                self.linked.tolist(),
                strict=True,
            )
        ):
            since_ns = previous_launch_ns.get(tid, -(1 << 62))
            previous_launch_ns[tid] = launch_ns
            best = descriptions.best(tid, since_ns, launch_ns, kernel_name) if linked else []
            if not best:
                self.bare.append((kernel, order))
                continue
            for row in best:
                self.ops.append(descriptions.op(self.pos, kernel, order, row))


class _Descriptions:
    """A rank's ``comm_*`` rows (the kernels' descriptions) as plain lists, by host thread in
    start order: one lookup per kernel and per candidate, not a numpy scalar each."""

    def __init__(self, tl: Timeline) -> None:
        self.names = tl.names
        self.rows_by_tid: dict[int, list[int]] = {}
        self.starts_by_tid: dict[int, list[int]] = {}
        for tid, rows in groups(tl.comm_tid):
            rows = rows[np.argsort(tl.comm_start_ns[rows], kind="stable")]
            self.rows_by_tid[int(tid)] = rows.tolist()
            self.starts_by_tid[int(tid)] = tl.comm_start_ns[rows].tolist()
        self.kind, self.name = tl.comm_kind.tolist(), tl.comm_name.tolist()
        self.peer, self.group = tl.comm_peer.tolist(), tl.comm_group.tolist()
        self.src, self.seq = tl.comm_src.tolist(), tl.comm_seq.tolist()
        # per description its rank among candidates: a known peer/group first, then by source
        self.score = [
            (0 if peer >= 0 or (kind == COMM_COLL and group >= 0) else 1, src)
            for peer, kind, group, src in zip(
                self.peer, self.kind, self.group, self.src, strict=True
            )
        ]
        self.fits: dict[tuple[int, int, int], bool] = {}  # (kind, name, kernel name): describes

    def best(self, tid: int, since_ns: int, launch_ns: int, kernel_name: int) -> list[int]:
        """The rows of thread ``tid`` that start in (``since_ns``, ``launch_ns``] and fit the
        kernel named ``kernel_name`` (a symbol), of the best score; [] none."""
        rows = self.rows_by_tid.get(tid)
        if rows is None:
            return []
        starts = self.starts_by_tid[tid]  # sorted; kernels come in launch order, so the
        # (since, launch] windows of one thread do not overlap: linear in all
        kind, name, fits = self.kind, self.name, self.fits
        fitting = []
        for row in rows[bisect_right(starts, since_ns) : bisect_right(starts, launch_ns)]:
            key = (kind[row], name[row], kernel_name)
            fit = fits.get(key)
            if fit is None:
                fit = fits[key] = describes(
                    kind[row], self.names[name[row]], self.names[kernel_name]
                )
            if fit:
                fitting.append(row)
        if len(fitting) <= 1:  # the usual: one description per kernel
            return fitting
        top = min(self.score[row] for row in fitting)
        return [row for row in fitting if self.score[row] == top]

    def op(self, pos: int, kernel: int, order: int, row: int) -> Op:
        """The described op of ``kernel`` (launch ``order`` on the rank at ``pos``) by
        ``row``."""
        group = self.group[row]
        return Op(
            pos,
            kernel,
            self.kind[row],
            self.peer[row],
            self.names[group] if group >= 0 else None,
            self.seq[row],
            self.names[self.name[row]],
            self.src[row],
            order,
        )
