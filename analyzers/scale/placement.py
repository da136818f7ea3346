"""Which run-level analyses of a report run where the ranks are read (``crossrank.remote``),
so that no timeline travels to the client (docs/scale.md, "What runs where"), and the
scratch per-rank cache their second round reads from."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.graph.dropset import DropSpec
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.scale.dispatch import Backend
from profplug.analyzers.scale.load import trace_files

RunAnalyzer = Callable[..., Any]


@contextmanager
def scratch_cache(read: ReadOptions, backend: Backend) -> Iterator[ReadOptions]:
    """``read`` with a per-rank cache for the report's own use: a temporary folder, removed
    after, when it has none and the backend's processes share this machine's disk (the
    local pool, a LocalCluster); a second read of a file is then a load of its Timelines,
    not a parse. With ``--cache`` (and on a Dask cluster, whose workers may not see this
    machine's disk) ``read`` as it is."""
    if read.cache_dir is not None or not getattr(backend, "shares_disk", False):
        yield read
        return
    folder = tempfile.mkdtemp(prefix="profplug-scratch-")
    try:
        yield read.with_cache(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


SPREAD_MIN_BYTES = 500_000_000  # with a what-if: below, the timelines travel
SPREAD_ENV = "PROFPLUG_SPREAD_MIN_BYTES"  # another threshold (0: always, when it can)


def min_bytes() -> int:
    """The threshold of a report with a what-if: ``$PROFPLUG_SPREAD_MIN_BYTES`` (bytes of
    traces), else ``SPREAD_MIN_BYTES``."""
    raw = os.environ.get(SPREAD_ENV, "").strip()
    try:
        return int(raw) if raw else SPREAD_MIN_BYTES
    except ValueError:
        raise ProfplugError(f"${SPREAD_ENV}: not a number of bytes: {raw!r}") from None


@dataclass
class Spreading:
    """The run-level analyses that run where the ranks are read (``crossrank.remote``)."""

    cross: RunAnalyzer | None
    whatif: RunAnalyzer | None
    lanes: bool = False  # the cross-rank analysis with its swimlane (a page draws it)


def spreading(run: list[RunAnalyzer], keep_gaps: bool, files: list[Path]) -> Spreading | None:
    """The analyses of ``run`` when they run where the ranks are read, so that no timeline
    travels: when every analysis can: the cross-rank analysis (``spreads``; with its
    swimlane when ``keep_gaps``: a page draws both, each rank's row made where it is read),
    a what-if that can (``spread_drop``: its rule, ``--drop-at`` too) on a run of
    at least ``SPREAD_MIN_BYTES`` of traces (below, in one process: docs/scale.md), the
    analyses of runs without GPU work."""
    cross = next((a for a in run if getattr(a, "spreads", False)), None)
    whatif = next((a for a in run if getattr(a, "spread_drop", None) is not None), None)
    rest = [a for a in run if a is not cross and a is not whatif
            and not getattr(a, "without_gpu_only", False)]
    if rest or (cross is None and whatif is None):
        return None
    if whatif is not None and sum(f.stat().st_size for f in trace_files(files)) < \
            min_bytes():
        return None
    return Spreading(cross, whatif, lanes=keep_gaps and cross is not None)


def spread_drop(spread: Spreading) -> DropSpec | None:
    """The drop rule of the what-if made where the ranks are read, None: no what-if."""
    return getattr(spread.whatif, "spread_drop", None)
