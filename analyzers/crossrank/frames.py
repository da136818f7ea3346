"""DataFrames of the cross-rank analysis (pandas imported only here, only when asked)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profplug.analyzers.crossrank.critical import CATEGORIES
from profplug.analyzers.crossrank.result import CrossRankResult, us

if TYPE_CHECKING:
    import pandas as pd


def _result(x: Any) -> CrossRankResult:
    """A CrossRankResult, or the one in a Report's run-level results."""
    if isinstance(x, CrossRankResult):
        return x
    res: CrossRankResult | None = getattr(x, "run", {}).get(CrossRankResult.key)
    if res is None:
        raise KeyError("the report has no cross_rank result (analyze(..., "
                       "run=[cross_rank_analysis()]))")
    return res


def bubbles_frame(rep: Any) -> pd.DataFrame:
    """One row per rank and complete step: idle, NCCL time split into transfer and peer
    wait, bubble (us), and the drain (median host lead us, mean/max queue depth, time the
    launch queue was empty us)."""
    import pandas as pd

    res = _result(rep)
    rows = []
    for b in res.bubbles:
        st = b.steps
        if st is None:
            continue
        d = res.drain(b.rank)
        for k, step in enumerate(st.step_numbers):
            lead = d.steps_lead_p50_ns[k]
            rows.append({"rank": b.rank, "step": step, "idle_us": us(st.idle_ns[k]),
                         "comm_us": us(st.comm_ns[k]), "comm_transfer_us": us(st.transfer_ns[k]),
                         "comm_wait_us": us(st.wait_ns[k]), "bubble_us": us(st.bubble_ns[k]),
                         "host_lead_p50_us": None if lead is None else us(lead),
                         "queue_depth_mean": float(d.steps_depth_mean[k]),
                         "queue_depth_max": int(d.steps_depth_max[k]),
                         "queue_empty_us": us(d.steps_empty_ns[k])})
    return pd.DataFrame(rows)


def critical_path_frame(rep: Any) -> pd.DataFrame:
    """One row per step: its span (us), the rank most on its critical path, and the path's
    shares by category (``compute`` ... ``other``) and by rank (``rank_<R>``)."""
    import pandas as pd

    res = _result(rep)
    rows = []
    for st in res.critical_path.steps:
        row: dict[str, Any] = {"step": st["step"], "span_us": st["span_us"],
                               "top_rank": st["top_rank"]}
        row.update({c: st["by_category"].get(c, 0.0) for c in CATEGORIES})
        row.update({f"rank_{r}": v for r, v in st["by_rank"].items()})
        rows.append(row)
    return pd.DataFrame(rows).fillna({c: 0.0 for r in rows for c in r if c.startswith("rank_")})
