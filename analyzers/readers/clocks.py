"""Which ranks' timestamps can be put on one time axis, and how.

Every rank's times are on its trace's own clock. Kineto with ``baseTimeNanoseconds`` (or
older torch's epoch microseconds) is on the wall clock, as epoch ns; Kineto without a base
is relative to that rank's own start; an Nsight export is on its session's clock, shared by
the processes of that one export. A run-level analysis that joins ranks (the cross-rank
matching, hence the critical path, bubbles and the what-if's coupled kernels) must put them
on one axis first. Ranks linked by matched NCCL kernels are aligned by the median end
difference of those kernels (both ends of a transfer finish together), with the residual
stated (the median absolute deviation of those differences around the median); ranks that
no matched kernel links are joined only when their clocks are the same, else the analysis
is refused with a one-line reason (a 56-year critical path is worse than none).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import TraceKind
from profplug.analyzers.steps import stats

EPOCH = "wall clock (epoch ns)"
ONE_REPORT = "one clock (all ranks in one Nsight report)"
ONE_FILE = "one clock (all ranks in one trace file)"
SINGLE = "one rank with GPU work: no clocks to align"
MEDIAN_END = "median end difference of matched kernels, per rank"
NOTE_OFFSET_NS = 2_000  # offsets beyond this are noted
# Ranks of one run on the wall clock are ms apart at most (one host, or NTP); seconds apart,
# their traces are of two runs (rank 0 of one run, rank 1 of another: a pipeline never run)
MIXED_RUN_NS = 1_000_000_000
TWO_RUNS = "check that every trace is of one run"


def clock_of(tl: Timeline) -> str:
    """The clock a rank's timestamps are on: ranks with the same string share it."""
    files = ", ".join(tl.files)
    if tl.source == TraceKind.NSYS:
        return f"the session clock of {files}"
    if tl.metadata.get("clock") == "epoch":
        return EPOCH
    return f"the own clock of {files}"


@dataclass
class Alignment:
    """Per position, the offset that puts it on the first root's clock (ns)."""

    offset_ns: np.ndarray
    rule: str
    notes: list[str] = field(default_factory=list)
    refused: str | None = None  # why the ranks cannot be joined (None: they can)
    residual_ns: int = 0  # the largest residual of an alignment made
    warnings: list[str] = field(default_factory=list)  # ranks that look like two runs


def align(timelines: list[Timeline], edges: np.ndarray) -> Alignment:
    """Offsets from matched kernel ``edges`` (rows: pos, op, partner pos, partner op, ...)."""
    n = len(timelines)
    off = np.zeros(n, dtype=np.int64)
    if n < 2:
        return Alignment(off, SINGLE)
    if all(tl.files == timelines[0].files for tl in timelines):  # true of the format in hand
        return Alignment(off, ONE_REPORT if timelines[0].source == TraceKind.NSYS else ONE_FILE)
    clocks = [clock_of(tl) for tl in timelines]
    out = Alignment(off, MEDIAN_END)
    roots = _offsets(timelines, _pair_medians(timelines, edges), clocks, out)
    first = timelines[roots[0]]
    for i, tl in enumerate(timelines):
        if abs(off[i]) > MIXED_RUN_NS and clocks[i] == clocks[roots[0]] == EPOCH:
            out.warnings.append(
                f"ranks {first.rank} and {tl.rank}: their wall clocks are "
                f"{abs(off[i]) / 1e9:,.1f} s apart (matched NCCL kernels), as traces of two "
                f"runs are, not one run's ranks: {TWO_RUNS}")
        if abs(off[i]) > NOTE_OFFSET_NS:
            out.notes.append(f"rank {tl.rank}: clock offset {off[i] / 1000:+.1f} us against "
                             f"rank {first.rank} (median end difference of matched "
                             "kernels); cross-rank times use aligned clocks")
    unlinked = [r for r in roots[1:] if clocks[r] != clocks[roots[0]]]
    if unlinked:
        other = timelines[unlinked[0]]
        out.refused = (f"ranks {first.rank} and {other.rank} are on different clocks "
                       f"({clocks[roots[0]]}; {clocks[unlinked[0]]}) and no matched NCCL "
                       "kernel links them to align them: not joined across ranks")
    return out


def _pair_medians(timelines: list[Timeline], edges: np.ndarray
                  ) -> dict[tuple[int, int], tuple[int, int, int]]:
    """Per pair of positions (a, b) linked by ``edges`` (in the order first matched): the
    median of the end differences a - b of its matched kernels (ns), their median absolute
    deviation around it (the residual, ns) and their count."""
    n = len(timelines)
    e = edges[edges[:, 0] < edges[:, 2]] if edges.size else edges.reshape(-1, 6)
    base = np.cumsum([0] + [tl.n_gpu for tl in timelines])
    end = np.concatenate([tl.gpu_end_ns for tl in timelines]).astype(np.int64)
    diff = end[base[e[:, 0]] + e[:, 1]] - end[base[e[:, 2]] + e[:, 3]]
    key = e[:, 0] * n + e[:, 2]
    order = np.argsort(key, kind="stable")
    ks = key[order]
    cut = np.flatnonzero(np.append(True, ks[1:] != ks[:-1])) if ks.size else ks  # no edge
    med: dict[tuple[int, int], tuple[int, int, int]] = {}
    for i in np.argsort(order[cut], kind="stable").tolist():  # first matched first
        lo, hi = int(cut[i]), int(cut[i + 1]) if i + 1 < cut.size else int(ks.size)
        arr = diff[order[lo:hi]]
        m = int(stats.median(arr))
        med[(int(ks[lo]) // n, int(ks[lo]) % n)] = (m, int(stats.median(np.abs(arr - m))),
                                                    arr.size)
    return med


def _offsets(timelines: list[Timeline], med: dict[tuple[int, int], tuple[int, int, int]],
             clocks: list[str], out: Alignment) -> list[int]:
    """Fills ``out.offset_ns`` (ns): from each root (the lowest rank not yet reached), the
    ranks its pairs (:func:`_pair_medians`) reach, each put on its neighbour's clock, with
    the residual and a note per change of clock. Returns the roots, in rank order."""
    off = out.offset_ns
    adj: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for (a, b), (d, res, cnt) in med.items():  # aligned b = b + d puts b's ends on a's
        adj[a].append((b, d, res, cnt))
        adj[b].append((a, -d, res, cnt))
    done = [False] * len(timelines)
    roots: list[int] = []
    for root in sorted(range(len(timelines)), key=lambda i: timelines[i].rank):
        if done[root]:
            continue
        done[root] = True
        roots.append(root)
        todo = [root]
        while todo:
            a = todo.pop()
            for b, d, res, cnt in adj[a]:
                if not done[b]:
                    done[b], off[b] = True, off[a] + d
                    todo.append(b)
                    out.residual_ns = max(out.residual_ns, res)
                    if clocks[a] != clocks[b]:
                        out.notes.append(
                            f"rank {timelines[b].rank} ({clocks[b]}) put on rank "
                            f"{timelines[a].rank}'s clock ({clocks[a]}) from {cnt} matched "
                            f"NCCL kernel(s): residual +-{res / 1000:.1f} us")
    return roots


def sources_warning(ranks: list[Any], joined: bool) -> str | None:
    """One line when the ranks come from Kineto traces and Nsight exports together (issue
    #40 item 25): their clocks (the wall clock; an Nsight session's) cannot be compared, so
    nothing joins them across ranks (critical path, bubbles, coupled what-if) unless matched
    NCCL kernels aligned them (``joined``: the cross-rank analysis ran; then None)."""
    by_source: dict[str, list[int]] = defaultdict(list)
    for r in ranks:
        by_source[r.source].append(r.rank)
    if joined:
        return None
    if len(by_source) < 2:
        return _unbased_warning(ranks)
    parts = "; ".join(f"{src} ranks {sorted(rs)}" for src, rs in sorted(by_source.items()))
    return (f"mixed sources ({parts}): the ranks' clocks cannot be compared (Kineto's "
            "wall clock vs an Nsight session's), so no cross-rank figure joins them "
            "(critical path, bubbles, coupled what-if); each rank's own figures stand")


UNBASED = "no baseTimeNanoseconds"  # the Kineto reader's warning for a rank on its own clock


def _unbased_warning(ranks: list[Any]) -> str | None:
    """Kineto ranks on the wall clock and ranks on their own clock (no
    ``baseTimeNanoseconds``) together, not joined: why no cross-rank figure is there."""
    own = sorted(r.rank for r in ranks if any(str(w).startswith(UNBASED) for w in r.warnings))
    if not own or len(own) == len(ranks):
        return None
    wall = sorted(r.rank for r in ranks if r.rank not in set(own))
    return (f"mixed clocks (ranks {wall} on the wall clock, ranks {own} on their own: no "
            "baseTimeNanoseconds) and no matched NCCL kernel to align them: no cross-rank "
            "figure joins them (critical path, bubbles, coupled what-if); each rank's own "
            "figures stand")
