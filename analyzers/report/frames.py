"""DataFrames of a report (pandas imported only here, only when asked): one row per rank, per
call site, per idle gap."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from profplug.analyzers.core.analysis_spec import AddsRankFields
from profplug.analyzers.stalls.gaps import CAUSES

if TYPE_CHECKING:
    import pandas as pd
    from profplug.analyzers.report.analysis import Report


def ranks_frame(rep: Report) -> pd.DataFrame:
    """One row per rank: window, busy, compute, comm, idle and idle by cause (us); with the
    cross-rank analysis also comm_transfer_us, comm_wait_us and bubble_us."""
    import pandas as pd

    rows = []
    for r in rep.ranks:
        row = {"rank": r.rank, "source": r.source, "window_us": r.total("window_us"),
               "busy_us": r.total("busy_us"), "compute_us": r.total("compute_us"),
               "comm_us": r.total("comm_us"), "idle_us": r.total("idle_us"),
               "stream_wait_us": r.stream_wait_us,
               "step_us": r.steps.period_us if r.steps and r.steps.n_steps else None}
        row.update({f"{c}_us": v for c, v in r.idle_by_cause_us().items()})
        for a in rep.run.values():  # e.g. cross_rank: comm_transfer_us, comm_wait_us, bubble
            if isinstance(a, AddsRankFields) and r.has_gpu_work:
                row.update(a.rank_fields(r.rank))
        rows.append(row)
    return pd.DataFrame(rows)


def callsites_frame(rep: Report) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([{"rank": r.rank, **asdict(c)} for r in rep.ranks for c in r.callsites])


def gaps_frame(rep: Report) -> pd.DataFrame:
    """Every idle gap: rank, device, start/end (ns), duration (us), cause, API, call site."""
    import pandas as pd

    frames = []
    for r in rep.ranks:
        g = r.gaps
        api = [r.call_api[c] if c >= 0 else "" for c in g.call]
        site = [r.call_site[c] if c >= 0 else "" for c in g.call]
        frames.append(pd.DataFrame({
            "rank": r.rank, "device": g.device, "start_ns": g.start_ns, "end_ns": g.end_ns,
            "dur_us": (g.end_ns - g.start_ns) / 1000.0,
            "cause": [CAUSES[c] for c in g.cause], "api": api, "callsite": site}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
