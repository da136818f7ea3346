"""Where each run-level analysis of a report runs: in one process, as parts made where each
rank is read, or in the rounds of ``scale.run_level`` so that no timeline travels to the
client (docs/scale.md, "What runs where"); and the scratch per-rank cache the second round
reads from."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from profplug.analyzers.core.analysis_spec import CROSS_RANK, WHATIF, AnalysisSpec, PartFn
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.graph.dropset import DropSpec
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.scale.dispatch import Backend
from profplug.analyzers.scale.load import trace_files


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


ROUNDS_MIN_BYTES = 500_000_000  # with a what-if: below, the timelines travel
ROUNDS_ENV = "PROFPLUG_ROUNDS_MIN_BYTES"  # another threshold (0: always, when it can)
FORMER_ROUNDS_ENV = "PROFPLUG_SPREAD_MIN_BYTES"  # its former name: read when it is unset


def min_bytes() -> int:
    """The threshold of a report with a what-if: ``$PROFPLUG_ROUNDS_MIN_BYTES`` (bytes of
    traces), else its deprecated former name ``$PROFPLUG_SPREAD_MIN_BYTES`` (with a note on
    stderr, once), else ``ROUNDS_MIN_BYTES``."""
    name = ROUNDS_ENV
    if ROUNDS_ENV not in os.environ and FORMER_ROUNDS_ENV in os.environ:
        name = FORMER_ROUNDS_ENV
        _note_former_name()
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else ROUNDS_MIN_BYTES
    except ValueError:
        raise ProfplugError(f"${name}: not a number of bytes: {raw!r}") from None


@cache
def _note_former_name() -> None:
    print(f"profplug: ${FORMER_ROUNDS_ENV} is deprecated, set ${ROUNDS_ENV} instead",
          file=sys.stderr)


@dataclass
class Placement:
    """Where each run-level analysis of a report runs (``core.analysis_spec``): ``whole``
    in one process on every rank's Timeline (they travel to the client), ``by_rank`` as
    parts made where each rank is read, ``rounds`` the two-round protocol of
    ``scale.run_level`` (None: none; then ``whole`` is empty)."""

    whole: list[AnalysisSpec]
    by_rank: list[AnalysisSpec]
    rounds: Rounds | None = None

    @property
    def parts(self) -> tuple[tuple[str, PartFn, str], ...]:
        """What each rank's task makes of the ``by_rank`` analyses (``dispatch.RankTask``)."""
        return tuple((s.name, s.part, s.applies) for s in self.by_rank)  # type: ignore[misc]  # by_rank: specs with a part


@dataclass
class Rounds:
    """The run-level analyses that run in rounds where the ranks are read (``run_level``)."""

    cross: AnalysisSpec | None
    whatif: AnalysisSpec | None
    lanes: bool = False  # the cross-rank analysis with its swimlane (a page draws it)

    @property
    def drop(self) -> DropSpec | None:
        """The drop rule of the what-if made where the ranks are read, None: no what-if."""
        return None if self.whatif is None else self.whatif.drop


def place(specs: list[AnalysisSpec], keep_gaps: bool, files: list[Path],
          in_rounds: bool = True) -> Placement:
    """Where each of ``specs`` runs: by rank when it has a part and a join; in rounds when
    every other analysis can (:func:`rounds_for`) and ``in_rounds``; else in one process."""
    by_rank = [s for s in specs if s.part is not None and s.join is not None]
    rest = [s for s in specs if s not in by_rank]
    rounds = rounds_for(rest, keep_gaps, files) if in_rounds else None
    return Placement([] if rounds is not None else rest, by_rank, rounds)


def rounds_for(run: list[AnalysisSpec], keep_gaps: bool,
              files: list[Path]) -> Rounds | None:
    """The analyses of ``run`` when they run in rounds where the ranks are read, so that no
    timeline travels: when every analysis can (``in_rounds``): the cross-rank analysis (with
    its swimlane when ``keep_gaps``: a page draws both, each rank's row made where it is
    read), a what-if on a run of at least ``ROUNDS_MIN_BYTES`` of traces (below, in one
    process: docs/scale.md)."""
    cross = next((a for a in run if a.in_rounds == CROSS_RANK), None)
    whatif = next((a for a in run if a.in_rounds == WHATIF), None)
    rest = [a for a in run if a is not cross and a is not whatif]
    if rest or (cross is None and whatif is None):
        return None
    if whatif is not None and sum(f.stat().st_size for f in trace_files(files)) < \
            min_bytes():
        return None
    return Rounds(cross, whatif, lanes=keep_gaps and cross is not None)

