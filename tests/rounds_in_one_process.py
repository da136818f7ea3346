"""The what-if where the ranks are read (``whatif/rounds.py``), its four steps run in one
process: what ``scale.run_level`` runs on the workers (1 and 3) and in the client (2 and 4),
for the tests that hold it to ``predict.whatif`` and for ``benchmarks/bench_solve.py``."""

from __future__ import annotations

import time

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.commview import comm_view, match_views
from profplug.analyzers.graph.dropat import site_counts
from profplug.analyzers.graph.model import DropSpec
from profplug.analyzers.graph.pathgraph import partners
from profplug.analyzers.stalls.rank import StallOptions
from profplug.analyzers.whatif.result import WhatIfResult
from profplug.analyzers.whatif.rounds import (
    joined,
    plan,
    rank_reductions,
    rank_whatif,
    resolved_at,
)


def whatif_in_rounds(timelines: list[Timeline], drop: DropSpec | None = None,
                     options: StallOptions | None = None) -> WhatIfResult:
    """The result ``predict.whatif`` gives, on a run without a cycle."""
    t0 = time.perf_counter()
    drop, opt = drop or DropSpec(), options or StallOptions()
    gpu = [tl for tl in timelines if tl.n_gpu]
    views = [comm_view(tl) for tl in gpu]
    m = match_views(views)
    parts = partners(m, lambda pos, o: gpu[pos].gpu_start_ns[o])
    ops = [v.op_index for v in views]
    if drop.callsite is not None:  # --drop-at: resolved over the ranks' call sites
        drop = resolved_at(drop, [site_counts(tl, drop.kinds) for tl in gpu])
    red = [rank_reductions(tl, drop.kinds, o, drop.callsite)
           for tl, o in zip(gpu, ops, strict=True)]
    p = plan(red, m, parts, ops, [v.tl.gpu_start_ns for v in views],
             [v.tl.gpu_end_ns for v in views], drop, opt)
    res = [rank_whatif(tl, a) for tl, a in zip(gpu, p.asks, strict=True)]
    sizes = [w for r in red if (w := r.world_size) is not None]
    return joined(p, res, [tl.rank for tl in timelines], sizes,
                  any(o.size for o in ops),
                  sum(tl.n_events for tl in timelines), t0)
