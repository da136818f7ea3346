"""profplug's offline analyzer (no torch needed): traces in, per-rank stall reports out.

Readers (``readers.kineto``, ``readers.nsys``) produce one :class:`Timeline` per rank;
analyses (``stalls``, ``compare``, ``whatif``) take timelines and return dataclasses or
pandas DataFrames; renderers (``render``) write tables, JSON, CSV and HTML.

    >>> from profplug.analyzers import analyze
    >>> rep = analyze(["runs/pp2/kineto"])
    >>> rep.rank(0).idle_by_cause_us()
"""

from __future__ import annotations

from .load import load_timelines
from .report import Report, analyze, analyze_timelines, callsites_frame, gaps_frame, ranks_frame
from .stalls import CAUSES, RankStalls, StallOptions, analyze_rank
from .timeline import Timeline

__all__ = [
    "CAUSES", "RankStalls", "Report", "StallOptions", "Timeline", "analyze", "analyze_rank",
    "analyze_timelines", "callsites_frame", "gaps_frame", "load_timelines", "ranks_frame",
]
