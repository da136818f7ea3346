"""The stall report of a run: every rank's analysis, as a value (dict / DataFrames).

``analyze(paths)`` is the library entry point behind ``profplug report``; the JSON schema
(``version`` 1) is documented in README.md and is stable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .load import load_timelines
from .rankpool import analyze_ranks
from .sanity import check_sum_rule
from .stalls import CAUSES, RankStalls, StallOptions
from .timeline import Timeline

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1


@dataclass
class Report:
    ranks: list[RankStalls]
    options: StallOptions = field(default_factory=StallOptions)
    meta: dict[str, Any] = field(default_factory=dict)  # run.json, when present

    def rank(self, r: int) -> RankStalls:
        for x in self.ranks:
            if x.rank == r:
                return x
        raise KeyError(r)

    def to_dict(self) -> dict[str, Any]:
        return {"version": SCHEMA_VERSION,
                "tolerance_us": self.options.tolerance_ns / 1000.0,
                "ranks": [rank_dict(r) for r in self.ranks]}


def rank_dict(r: RankStalls) -> dict[str, Any]:
    d: dict[str, Any] = {
        "rank": r.rank, "source": r.source, "files": r.files, "rank_rule": r.rank_rule,
        "has_gpu_work": r.has_gpu_work,
        "window_us": round(r.total("window_us"), 3), "busy_us": round(r.total("busy_us"), 3),
        "compute_us": round(r.total("compute_us"), 3), "comm_us": round(r.total("comm_us"), 3),
        "idle_us": round(r.total("idle_us"), 3),
        "idle_by_cause_us": {k: round(v, 3) for k, v in r.idle_by_cause_us().items()},
        "other_reasons": r.other_reasons,
        "stream_wait_us": round(r.stream_wait_us, 3),
        "stream_waits": [asdict(s) for s in r.stream_waits],
        "syncs": [asdict(s) for s in r.syncs],
        "callsites": [asdict(c) for c in r.callsites],
        "steps": None if r.steps is None else asdict(r.steps),
        "devices": [asdict(x) for x in r.devices],
        "warnings": r.warnings, "skipped": r.skipped,
    }
    return d


def analyze_timelines(timelines: Iterable[Timeline], options: StallOptions | None = None
                      ) -> Report:
    opt = options or StallOptions()
    ranks = analyze_ranks(list(timelines), opt)  # big runs: a process per rank
    check_sum_rule(ranks)  # never print figures that do not add up
    return Report(ranks, opt)


def analyze(paths: Iterable[str | Path], options: StallOptions | None = None, *,
            jobs: int | None = None) -> Report:
    """Read the traces under ``paths`` and attribute every rank's GPU idle time."""
    paths = list(paths)
    rep = analyze_timelines(load_timelines(paths, jobs=jobs), options)
    rep.meta = find_run_meta(paths)
    return rep


RUN_SUBDIRS = ("kineto", "nsys")  # where ``profplug run`` puts traces, beside run.json


def find_run_meta(paths: list[str | Path]) -> dict[str, Any]:
    """The ``run.json`` that ``profplug run`` wrote for these traces, if any.

    Only where ``profplug run`` puts it: in the directory given, beside the trace file, or
    one level up when the traces are in its ``kineto/`` or ``nsys/`` folder. A run.json
    further up belongs to something else (it would add foreign metadata and missing ranks).
    An unreadable one (bad JSON, nested too deep) is ignored.
    """
    import json

    for p in map(Path, paths):
        d = p if p.is_dir() else p.parent
        for cand in (d, d.parent) if d.name in RUN_SUBDIRS else (d,):
            f = cand / "run.json"
            if f.is_file():
                try:
                    meta = json.loads(f.read_text())
                except (OSError, ValueError, RecursionError):
                    return {}
                return meta if isinstance(meta, dict) else {}
    return {}


# ---------------------------------------------------------------- DataFrames (lazy pandas)
def ranks_frame(rep: Report) -> pd.DataFrame:
    """One row per rank: window, busy, compute, comm, idle and idle by cause (us)."""
    import pandas as pd

    rows = []
    for r in rep.ranks:
        row = {"rank": r.rank, "source": r.source, "window_us": r.total("window_us"),
               "busy_us": r.total("busy_us"), "compute_us": r.total("compute_us"),
               "comm_us": r.total("comm_us"), "idle_us": r.total("idle_us"),
               "stream_wait_us": r.stream_wait_us,
               "step_us": r.steps.period_us if r.steps and r.steps.n_steps else None}
        row.update({f"{c}_us": v for c, v in r.idle_by_cause_us().items()})
        rows.append(row)
    return pd.DataFrame(rows)


def syncs_frame(rep: Report) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([{"rank": r.rank, **asdict(s)} for r in rep.ranks for s in r.syncs])


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
