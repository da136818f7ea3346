"""The per-rank input of cross-rank matching, small enough to leave the worker that read it.

:func:`matching.match` reads every rank's whole :class:`Timeline`. A worker that read a rank
builds its :class:`CommView` instead: a timeline holding only what matching and
``clocks.align`` read, so the client matches views (:func:`match_views`) and holds no
per-event data beyond the NCCL kernels. The view keeps:

- GPU ops: the NCCL/RCCL kernels only (``classify.comm_for_symbols``), in their order, all
  ``gpu_*`` columns; ``op_index``: per kept op, its index in the full timeline;
- host API calls: the ones that launched those kernels (``timeline.launch_calls``: same
  correlation id), in their order, all ``api_*`` columns except the nesting column
  (``api_top``, not read by matching: left empty, recomputed over the kept calls if asked);
  a kernel finds the same call in the view as in the full timeline (the lowest-numbered
  call with its correlation id is the one kept, and no kept call before it has that id);
- every ``comm_*`` row and the steps;
- the symbol table cut to the names those rows use, ids renumbered in the same order;
- what ``clocks.clock_of`` reads: rank, source, files, ``metadata["clock"]``.

Every choice matching makes on a view is the one it makes on the full timeline: kept rows
keep their relative order (ties in its sorts break the same way), symbol ids keep theirs,
and the clock alignment reads the same kernels' ends. :func:`match_views` then renumbers
the kernels of the edges and ``comm_ops`` through ``op_index``: the result equals
``match(timelines)`` field by field (tests/unit/analyzers/graph/test_commview.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.timeline import Timeline, launch_calls
from profplug.analyzers.graph.matching import Matching, match

_GPU = ("gpu_start_ns", "gpu_end_ns", "gpu_device", "gpu_stream", "gpu_kind", "gpu_name",
        "gpu_corr")
_API = ("api_start_ns", "api_end_ns", "api_tid", "api_name", "api_corr")
_KEEP = ("step_start_ns", "step_end_ns", "step_num", "comm_start_ns", "comm_end_ns",
         "comm_tid", "comm_kind", "comm_peer", "comm_seq", "comm_src")


@dataclass
class CommView:
    """One rank's NCCL kernels, their launching calls and ``comm_*`` rows (module docstring).

    ``tl``: the view as a timeline (op numbering of its own); ``op_index``: per GPU op of
    ``tl``, its index in the rank's full timeline (int64, ascending)."""

    tl: Timeline
    op_index: np.ndarray

    @property
    def rank(self) -> int:
        return self.tl.rank

    @property
    def nbytes(self) -> int:
        """Bytes of its numpy arrays (the symbol table's strings not counted)."""
        return array_bytes(self.tl) + int(self.op_index.nbytes)


def array_bytes(tl: Timeline) -> int:
    """Bytes of a timeline's numpy columns."""
    return sum(int(getattr(tl, k).nbytes) for k in Timeline._ARRAYS)


def comm_view(tl: Timeline, memo: Memo | None = None) -> CommView:
    """The :class:`CommView` of one rank's full timeline (built where the rank is read)."""
    comm = classify.comm_for_symbols(tl.names, memo)[tl.gpu_name] if tl.n_gpu else \
        np.zeros(0, dtype=bool)
    ops = np.flatnonzero(comm).astype(np.int64)
    calls = launch_calls(tl, memo)[ops]
    api = np.unique(calls[calls >= 0])  # ascending: the calls keep their order
    group = tl.comm_group
    syms = np.unique(np.concatenate([
        tl.gpu_name[ops], tl.api_name[api], tl.comm_name, group[group >= 0]]).astype(np.int64))

    def sym(a: np.ndarray) -> np.ndarray:  # old symbol id -> new (same order), -1 stays
        return np.where(a >= 0, np.searchsorted(syms, a), -1).astype(a.dtype)

    cols: dict[str, Any] = {k: getattr(tl, k)[ops] for k in _GPU}  # Timeline's column fields
    cols |= {k: getattr(tl, k)[api] for k in _API}
    cols |= {k: getattr(tl, k).copy() for k in _KEEP}
    cols["gpu_name"], cols["api_name"] = sym(cols["gpu_name"]), sym(cols["api_name"])
    cols["comm_name"], cols["comm_group"] = sym(tl.comm_name), sym(group)
    clock = {"clock": tl.metadata["clock"]} if "clock" in tl.metadata else {}
    view = Timeline(rank=tl.rank, source=tl.source, files=list(tl.files),
                    rank_rule=tl.rank_rule, names=[tl.names[s] for s in syms.tolist()],
                    steps_rule=tl.steps_rule, metadata=clock, **cols)
    return CommView(view, ops)


def match_views(views: list[CommView]) -> Matching:
    """:func:`matching.match` of the ranks the views came from (in that order): the same
    result, kernels numbered as in the full timelines."""
    m = match([v.tl for v in views])
    index = np.concatenate([np.zeros(0, dtype=np.int64), *(v.op_index for v in views)])
    base = np.cumsum([0] + [v.op_index.size for v in views])[:-1].astype(np.int64)
    return replace(m, e_op=index[base[m.e_pos] + m.e_op], f_op=index[base[m.f_pos] + m.f_op],
                   comm_ops=[v.op_index[k] for v, k in zip(views, m.comm_ops, strict=True)],
                   rule_counts=dict(m.rule_counts), unmatched=list(m.unmatched),
                   notes=list(m.notes), warnings=list(m.warnings), ranks=list(m.ranks))
