"""profplug's offline analyzer (no torch needed): traces in, per-rank stall reports out.

Readers (``readers/``, listed in ``readers.registry``) produce one :class:`Timeline` per
rank; analyses take timelines and return dataclasses (``stalls`` per rank; ``whatif`` and
``crossrank`` over the whole run; ``compare`` over two reports); a :class:`Report` holds both
kinds; renderers (``render.registry``) write tables, JSON, CSV and HTML. The packages are
layered (``core`` at the bottom, ``commands`` at the top): docs/architecture.md.

    >>> from profplug.analyzers import analyze
    >>> rep = analyze(["runs/pp2/kineto"])
    >>> rep.rank(0).idle_by_cause_us()

The names below load on first use, so that ``profplug.analyzers.core`` (the vocabulary the
runtime plugin shares) imports nothing else.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import Any

_WHERE = MappingProxyType({
    "CAUSES": "stalls.gaps",
    "RankResult": "stalls.rank", "StallOptions": "stalls.rank", "analyze_rank": "stalls.rank",
    "ReadOptions": "readers.base",
    "Timeline": "core.timeline",
    "load_timelines": "scale.load",
    "bubbles_frame": "crossrank", "critical_path_frame": "crossrank", "cross_rank": "crossrank",
    "cross_rank_analysis": "crossrank",
    "Report": "report.analysis", "RunAnalysis": "report.analysis", "analyze": "report.analysis",
    "analyze_timelines": "report.analysis", "callsites_frame": "report.frames",
    "gaps_frame": "report.frames", "ranks_frame": "report.frames",
    "whatif_paths": "report.analysis",
})
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'profplug.analyzers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"profplug.analyzers.{_WHERE[name]}"), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value
