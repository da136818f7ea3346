"""What ``whatif RUN --against OTHER`` and ``compare``'s against section read: OTHER's
timelines (a traced run; an ab directory is refused in one line), then the prediction lined
up with them (``whatif/against.py``)."""

from __future__ import annotations

from pathlib import Path

from profplug.analyzers.compare.ab_runs import is_ab_dir
from profplug.analyzers.core.errors import ProfplugError, TraceError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.scale.pathargs import PathsLike, as_paths
from profplug.analyzers.stalls.rank import StallOptions
from profplug.analyzers.whatif.against import AgainstResult, against
from profplug.analyzers.whatif.result import WhatIfResult

MAX_EVENTS = 2_000_000  # compare: lined up only when both runs are this small (as the what-if)


def other_paths(other: str) -> list[Path]:
    """OTHER's paths (a directory, a trace file, or files joined by commas); a one-line error
    when one is missing or OTHER is a ``profplug ab`` directory."""
    if is_ab_dir(other):
        raise ProfplugError(f"--against {other}: a profplug ab directory; --against needs a "
                            f"traced run of the other policy (`profplug compare RUN {other}` "
                            "holds the what-if against ab's measured step and CI)")
    p = Path(other)
    paths = as_paths(p if p.exists() or "," not in other
                     else [Path(x) for x in other.split(",") if x])
    for x in paths:
        if not x.exists():
            raise TraceError(f"--against: {x}: no such file or directory")
    return paths


def label_of(other: str) -> str:
    """A run's name: its directory's name, else its (first) file's stem."""
    p = Path(other.split(",")[0]) if not Path(other).exists() else Path(other)
    return p.name if p.is_dir() else p.name.split(".")[0]


def load_other(paths: PathsLike, read: ReadOptions | None = None) -> list[Timeline]:
    """OTHER's timelines; a TraceError when it holds no GPU work to line up."""
    timelines = load_timelines(paths, read=read)
    if not any(t.n_gpu for t in timelines):
        raise TraceError(f"--against: {', '.join(map(str, as_paths(paths)))}: no GPU work "
                         "in the traces")
    return timelines


def compare_against(res: object, paths_a: PathsLike, paths_b: PathsLike, label_b: str,
                    options: StallOptions | None, read: ReadOptions | None
                    ) -> AgainstResult | None:
    """``compare A B``'s against section: A's what-if (``res``, from its report) lined up with
    B; None when A has no what-if or either run is over ``MAX_EVENTS`` (read again here: the
    reports keep no timeline)."""
    if not isinstance(res, WhatIfResult) or res.n_events > MAX_EVENTS:
        return None
    ta = load_timelines(paths_a, read=read)
    tb = load_timelines(paths_b, read=read)
    if sum(t.n_events for t in tb) > MAX_EVENTS or not any(t.n_gpu for t in tb):
        return None
    return against(res, ta, tb, label_b, options)
