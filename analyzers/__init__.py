"""profplug's offline analyzer (no torch needed): traces in, per-rank stall reports out.

Readers (``readers/``, listed in ``readers.registry``) produce one :class:`Timeline` per
rank; analyses take timelines and return dataclasses (``stalls`` per rank; ``whatif`` and
``crossrank`` over the whole run; ``compare`` over two reports); a :class:`Report` holds both
kinds; renderers (``render.registry``) write tables, JSON, CSV and HTML. The packages are
layered (``core`` at the bottom, ``commands`` at the top): docs/architecture.md.

The front door is :func:`open_run` (docs/python-api.md):

    >>> from profplug.analyzers import open_run
    >>> pp2 = open_run("runs/pp2/kineto")
    >>> pp2.stalls                      # one row per rank, times in us
    >>> pp2.whatif().rank(0).predicted_us

The names below are imported for editors and type checkers (``TYPE_CHECKING``) and load on
first use at run time (``_WHERE``): the runtime plugin imports ``profplug.analyzers.core``
inside every rank, and this package's ``__init__`` then runs too; importing every name here
would load numpy, msgspec and the whole analyzer (~380 modules, ~0.4 s) into each rank.
``tests/unit/analyzers/test_public_api.py`` checks that the two lists and ``__all__`` agree.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profplug.analyzers.commands.front import Run, open_run
    from profplug.analyzers.compare.reports import Comparison
    from profplug.analyzers.core.errors import ProfplugError, TraceError
    from profplug.analyzers.core.timeline import Timeline
    from profplug.analyzers.crossrank import (
        CrossRankResult,
        bubbles_frame,
        critical_path_frame,
        cross_rank,
        cross_rank_analysis,
    )
    from profplug.analyzers.graph.dropset import DropSpec
    from profplug.analyzers.readers.base import ReadOptions
    from profplug.analyzers.report.analysis import (
        Report,
        RunAnalysis,
        analyze,
        analyze_timelines,
        whatif_paths,
    )
    from profplug.analyzers.report.frames import callsites_frame, gaps_frame, ranks_frame
    from profplug.analyzers.scale.load import load_timelines
    from profplug.analyzers.stalls.gaps import CAUSES
    from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank
    from profplug.analyzers.whatif.result import WhatIfResult

# name -> the module (under profplug.analyzers) it loads from on first use
_WHERE = MappingProxyType({
    "CAUSES": "stalls.gaps",
    "Comparison": "compare.reports",
    "CrossRankResult": "crossrank", "bubbles_frame": "crossrank",
    "critical_path_frame": "crossrank", "cross_rank": "crossrank",
    "cross_rank_analysis": "crossrank",
    "DropSpec": "graph.dropset",
    "ProfplugError": "core.errors", "TraceError": "core.errors",
    "RankResult": "stalls.rank", "StallOptions": "stalls.rank", "analyze_rank": "stalls.rank",
    "ReadOptions": "readers.base",
    "Report": "report.analysis", "RunAnalysis": "report.analysis", "analyze": "report.analysis",
    "analyze_timelines": "report.analysis", "whatif_paths": "report.analysis",
    "Run": "commands.front", "open_run": "commands.front",
    "Timeline": "core.timeline",
    "WhatIfResult": "whatif.result",
    "callsites_frame": "report.frames", "gaps_frame": "report.frames",
    "ranks_frame": "report.frames",
    "load_timelines": "scale.load",
})

__all__ = [
    "CAUSES",
    "Comparison",
    "CrossRankResult",
    "DropSpec",
    "ProfplugError",
    "RankResult",
    "ReadOptions",
    "Report",
    "Run",
    "RunAnalysis",
    "StallOptions",
    "Timeline",
    "TraceError",
    "WhatIfResult",
    "analyze",
    "analyze_rank",
    "analyze_timelines",
    "bubbles_frame",
    "callsites_frame",
    "critical_path_frame",
    "cross_rank",
    "cross_rank_analysis",
    "gaps_frame",
    "load_timelines",
    "open_run",
    "ranks_frame",
    "whatif_paths",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'profplug.analyzers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"profplug.analyzers.{_WHERE[name]}"), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    """The public names too (tab completion lists them before they load)."""
    return sorted({*globals(), *__all__})
