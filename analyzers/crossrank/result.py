"""Cross-rank results as values: ``CrossRankResult.to_dict()`` is the JSON ``cross_rank`` key.

Times in us (3 decimals: ns), shares as fractions of 1, percentages of the rank's GPU window.
Per rank it also gives the fields the report adds to each rank's JSON (``rank_fields``,
``step_fields``). Rendered by ``render/crossrank_*.py``; schema in docs/crossrank.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from profplug.analyzers.crossrank.bubbles import RankBubbles
from profplug.analyzers.crossrank.drain import RankDrain
from profplug.analyzers.crossrank.swimlane import Swimlane
from profplug.analyzers.readers.clocks import TWO_RUNS
from profplug.analyzers.steps import stats

SCHEMA_VERSION = 1


def us(ns: float | int) -> float:
    return round(float(ns) / 1000.0, 3)


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


@dataclass
class CriticalPath:
    """Shares of the steps' critical paths (see ``critical``), summed over the steps."""

    definition: str
    basis: str  # "step" | "window"
    n_steps: int
    length_us: float  # total length of the paths
    by_category: dict[str, float]
    by_rank: dict[str, float]
    top_rank: int | None
    top_callsites: list[dict[str, Any]]  # rank, callsite, category, share, steps
    steps: list[dict[str, Any]]  # step, span_us, by_category, by_rank, top_rank

    def to_dict(self) -> dict[str, Any]:
        return {"definition": self.definition, "basis": self.basis, "n_steps": self.n_steps,
                "length_us": self.length_us, "by_category": self.by_category,
                "by_rank": self.by_rank, "top_rank": self.top_rank,
                "top_callsites": self.top_callsites, "steps": self.steps}


@dataclass
class CrossRankResult:
    """A run-level analysis (``Report.run["cross_rank"]``): bubbles, critical path, drain."""

    key: ClassVar[str] = "cross_rank"

    ranks: list[int]
    matching: dict[str, Any]
    bubbles: list[RankBubbles]
    drains: list[RankDrain]
    critical_path: CriticalPath
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    swimlane: Swimlane | None = None  # HTML only, not in the JSON
    analysis_s: float = 0.0
    # what the figures were made from, for the merged trace (``render.chrometrace``), not
    # in the JSON: the matched kernels and clock offsets, each step's critical path
    matched: Any = field(default=None, repr=False, compare=False)  # graph.matching.Matching
    paths: Any = field(default=None, repr=False, compare=False)  # list[critical.StepPath]

    def bubble(self, rank: int) -> RankBubbles:
        for b in self.bubbles:
            if b.rank == rank:
                return b
        raise KeyError(rank)

    def drain(self, rank: int) -> RankDrain:
        for d in self.drains:
            if d.rank == rank:
                return d
        raise KeyError(rank)

    # ---- fields the report adds to each rank's JSON ------------------------------------
    def run_warnings(self) -> list[str]:
        """Its warnings about the whole run (ranks of two runs: ``readers.clocks.TWO_RUNS``),
        taken from its own for the report's, which states them first."""
        two = [w for w in self.warnings if TWO_RUNS in w]
        self.warnings = [w for w in self.warnings if w not in two]
        return two

    def rank_fields(self, rank: int) -> dict[str, Any]:
        """``comm_transfer_us``, ``comm_wait_us`` (they add up to ``comm_us``) and
        ``bubble_us`` (= ``idle_us + comm_wait_us``) of one rank."""
        b = self.bubble(rank)
        return {"comm_transfer_us": us(b.transfer_ns), "comm_wait_us": us(b.wait_ns),
                "bubble_us": us(b.bubble_ns)}

    def step_fields(self, rank: int) -> dict[str, Any]:
        """The same per complete step (lists in the order of ``steps.step_numbers``)."""
        st = self.bubble(rank).steps
        if st is None:
            return {}
        return {"idle_us": [us(x) for x in st.idle_ns.tolist()],
                "comm_us": [us(x) for x in st.comm_ns.tolist()],
                "comm_transfer_us": [us(x) for x in st.transfer_ns.tolist()],
                "comm_wait_us": [us(x) for x in st.wait_ns.tolist()],
                "bubble_us": [us(x) for x in st.bubble_ns.tolist()]}

    # ---- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ``cross_rank`` object of the JSON report (docs/crossrank.md)."""
        return {"version": SCHEMA_VERSION, "n_ranks": len(self.ranks),
                "matching": self.matching,
                "bubbles": [_bubble_dict(b) for b in self.bubbles],
                "critical_path": self.critical_path.to_dict(),
                "drain": [_drain_dict(d) for d in self.drains],
                "notes": list(self.notes), "warnings": list(self.warnings)}


def _bubble_dict(b: RankBubbles) -> dict[str, Any]:
    d: dict[str, Any] = {
        "rank": b.rank, "match_rule": b.match_rule, "window_us": us(b.window_ns),
        "idle_us": us(b.idle_ns), "comm_us": us(b.comm_ns),
        "comm_transfer_us": us(b.transfer_ns), "comm_wait_us": us(b.wait_ns),
        "comm_unmatched_us": us(b.unmatched_ns), "bubble_us": us(b.bubble_ns),
        "bubble_pct": _pct(b.bubble_ns, b.window_ns),
        "waits_for_us": {str(r): us(v) for r, v in b.waits_for_ns.items()}}
    if b.steps is not None and b.steps.step_numbers:
        n = len(b.steps.step_numbers)  # per step: the median over the non-outlier steps
        d["bubble_per_step_us"] = us(stats.center(b.steps.bubble_ns))
        d["comm_wait_per_step_us"] = us(stats.center(b.steps.wait_ns))
        d["bubble_per_step_us_mean"] = us(int(b.steps.bubble_ns.sum()) / n)
        d["comm_wait_per_step_us_mean"] = us(int(b.steps.wait_ns.sum()) / n)
    return d


def _drain_dict(d: RankDrain) -> dict[str, Any]:
    return {
        "rank": d.rank,
        "host_lead_p50_us": None if d.lead_p50_ns is None else us(d.lead_p50_ns),
        "queue_depth_mean": round(d.depth_mean, 3),
        "queue_empty_pct": _pct(d.empty_ns, d.window_ns),
        "steps": {"host_lead_p50_us": [None if x is None else us(x)
                                       for x in d.steps_lead_p50_ns],
                  "queue_depth_mean": [round(float(x), 3) for x in d.steps_depth_mean],
                  "queue_depth_max": [int(x) for x in d.steps_depth_max],
                  "queue_empty_us": [us(x) for x in d.steps_empty_ns.tolist()]}}
