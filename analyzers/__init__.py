"""profplug's offline analyzer (no torch needed): traces in, per-rank stall reports out.

Readers (``readers/``, listed in ``readers.registry``) produce one :class:`Timeline` per
rank; analyses take timelines and return dataclasses (``stalls`` per rank; ``whatif`` and
``crossrank`` over the whole run; ``compare`` over two reports); a :class:`Report` holds both kinds; renderers
(``render.registry``) write tables, JSON, CSV and HTML. See docs/architecture.md.

    >>> from profplug.analyzers import analyze
    >>> rep = analyze(["runs/pp2/kineto"])
    >>> rep.rank(0).idle_by_cause_us()
"""

from __future__ import annotations

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank import (
    bubbles_frame,
    critical_path_frame,
    cross_rank,
    cross_rank_analysis,
)
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.report.analysis import (
    Report,
    RunAnalysis,
    analyze,
    analyze_timelines,
    callsites_frame,
    gaps_frame,
    ranks_frame,
)
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.rank import RankStalls, StallOptions, analyze_rank

__all__ = [
    "CAUSES", "RankStalls", "ReadOptions", "Report", "RunAnalysis", "StallOptions", "Timeline",
    "analyze", "analyze_rank", "analyze_timelines", "bubbles_frame", "callsites_frame",
    "critical_path_frame", "cross_rank", "cross_rank_analysis", "gaps_frame",
    "load_timelines", "ranks_frame",
]
