"""What the client of a report in rounds knows of the run after round one, shared by every
analysis that runs in rounds (``core.analysis_spec.RoundsCapability``): each rank's comm
view (``commview``: its NCCL kernels, made where it is read), and the matching of the views
and each matched kernel's partner, made once, on first use, for all of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from profplug.analyzers.graph.commview import CommView, match_views
from profplug.analyzers.graph.matching import Matching
from profplug.analyzers.graph.pathgraph import Partners, partners
from profplug.analyzers.stalls.rank import StallOptions


@dataclass
class RunViews:
    """``views``: per rank with GPU work, in rank order, its comm view; ``all_ranks``: every
    rank read; ``n_events``: the run's API calls + GPU ops; ``keep_gaps``: the report draws
    a page (what each rank's idle gaps are for)."""

    views: list[CommView]
    options: StallOptions
    all_ranks: list[int] = field(default_factory=list)
    n_events: int = 0
    keep_gaps: bool = False

    @property
    def ranks(self) -> list[int]:
        """The ranks with GPU work, in the views' order (a rank's position is its index)."""
        return [v.rank for v in self.views]

    @cached_property
    def matching(self) -> Matching:
        """The views' matching (``commview.match_views``)."""
        return match_views(self.views)

    @cached_property
    def partners(self) -> list[Partners]:
        """Every rank's matched kernels' partners (``pathgraph.partners``)."""
        return partners(self.matching, self.starts_of)

    def starts_of(self, pos: int, ops: np.ndarray) -> np.ndarray:
        """The recorded starts of rank position ``pos``'s NCCL kernels ``ops`` (ns)."""
        v = self.views[pos]
        return v.tl.gpu_start_ns[np.searchsorted(v.op_index, ops)]
