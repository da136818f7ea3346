"""What a run without GPU work has (a CPU / gloo run, or GPU activity not recorded): per
rank, the host step times, the point-to-point and collective calls, and the synchronizes
issued. A run-level analysis (``Report.run["host_only"]``) that applies only when no rank
has GPU work; then the report, its table and its page are this short summary instead of
empty GPU tables.

Per rank (us; host clock):

- steps: the step ranges (``tl.step_*``, as the step rule chose them): count, the step time
  at :data:`steps.stats.STATISTIC` over the non-outlier steps, min and max;
- p2p calls: ``comm_*`` rows by kind (send, recv, collective);
- syncs issued: profplug's sync ranges (``profplug.sync.device``, ``profplug.sync.event``,
  ``profplug.synchronize ...``: the calls the sync policy or the patch made, whether or not a
  GPU was there to wait for), and the CUDA sync API calls by kind (``classify``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from profplug.analyzers.core.analysis_spec import GPU_FREE, AnalysisSpec
from profplug.analyzers.core.classify import KIND_LABELS, kinds_for_symbols
from profplug.analyzers.core.timeline import COMM_COLL, COMM_RECV, COMM_SEND, Timeline
from profplug.analyzers.steps.stats import STATISTIC, summarize

SYNC_RANGES = MappingProxyType({"profplug.sync.device": "sync.device", "profplug.sync.event": "sync.event",
                                "profplug.synchronize": "synchronize"})


@dataclass
class HostRank:
    rank: int
    source: str
    n_steps: int
    step_us: float | None  # STATISTIC over non-outlier steps; None without steps
    step_min_us: float | None
    step_max_us: float | None
    outlier_steps: list[int]  # step numbers
    p2p_calls: dict[str, int]  # send / recv / collective
    syncs_issued: dict[str, int]  # profplug sync ranges and CUDA sync APIs by kind


@dataclass
class HostOnlyResult:
    """A run-level analysis (see the module docstring)."""

    key: ClassVar[str] = "host_only"

    ranks: list[HostRank]
    statistic: str = STATISTIC

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.statistic, "ranks": [asdict(r) for r in self.ranks]}


def host_rank(tl: Timeline) -> HostRank:
    """The host-side summary of one rank (see the module docstring)."""
    order = np.argsort(tl.step_start_ns, kind="stable")
    dur = (tl.step_end_ns - tl.step_start_ns)[order] / 1000.0
    nums = tl.step_num[order]
    s = summarize(dur)
    kinds = tl.comm_kind
    p2p = {"send": int((kinds == COMM_SEND).sum()), "recv": int((kinds == COMM_RECV).sum()),
           "collective": int((kinds == COMM_COLL).sum())}
    syncs: dict[str, int] = {}
    names = tl.names
    if tl.ann_name.size:
        ids, counts = np.unique(tl.ann_name, return_counts=True)
        for i, c in zip(ids.tolist(), counts.tolist(), strict=True):
            name = names[i]
            for prefix, label in SYNC_RANGES.items():
                if name == prefix or name.startswith(prefix + " "):
                    syncs[label] = syncs.get(label, 0) + int(c)
    if tl.api_name.size:
        kind = kinds_for_symbols(names)[tl.api_name]
        for k, label in KIND_LABELS.items():
            n = int((kind == k).sum())
            if n:
                syncs[f"cuda {label}"] = n
    return HostRank(
        rank=tl.rank, source=tl.source, n_steps=s.n,
        step_us=round(s.value, 3) if s.n else None,
        step_min_us=round(float(dur.min()), 3) if s.n else None,
        step_max_us=round(float(dur.max()), 3) if s.n else None,
        outlier_steps=[int(nums[i]) for i in s.outliers],
        p2p_calls=p2p, syncs_issued=dict(sorted(syncs.items())))


def host_only(timelines: list[Timeline], options: object = None,
              ranks: object = None, memo: object = None) -> HostOnlyResult | None:
    """The summary when no rank has GPU work; None otherwise (the report has GPU tables)."""
    if not timelines or any(tl.n_gpu for tl in timelines):
        return None
    return HostOnlyResult([host_rank(tl) for tl in sorted(timelines, key=lambda t: t.rank)])


def host_part(tl: Timeline) -> HostRank | None:
    """One rank's part, made where it is read: its summary, None when it has GPU work."""
    return None if tl.n_gpu else host_rank(tl)


def host_join(parts: list[HostRank | None], ranks: object = None) -> HostOnlyResult | None:
    """The summary of every rank's part; None when a rank had GPU work (or there is none)."""
    if not parts or any(p is None for p in parts):
        return None
    return HostOnlyResult(sorted((p for p in parts if p is not None), key=lambda r: r.rank))


# Applies only when no rank has GPU work: then each rank's summary is made where it is read.
HOST_ONLY_SPEC = AnalysisSpec(name="host_only", label="host-only summary", run=host_only,
                              applies=GPU_FREE, part=host_part, join=host_join)
