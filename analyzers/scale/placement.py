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
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from profplug.analyzers.core.analysis_spec import AnalysisSpec, PartFn
from profplug.analyzers.core.errors import ProfplugError
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


ROUNDS_MIN_BYTES = 500_000_000  # below, the timelines travel
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
    parts made where each rank is read, ``rounds`` in rounds where the ranks are read
    (``scale.run_level``; empty: none)."""

    whole: list[AnalysisSpec]
    by_rank: list[AnalysisSpec]
    rounds: list[AnalysisSpec] = field(default_factory=list)

    @property
    def parts(self) -> tuple[tuple[str, PartFn, str], ...]:
        """What each rank's task makes of the ``by_rank`` analyses (``dispatch.RankTask``)."""
        return tuple((s.name, s.part, s.applies) for s in self.by_rank)  # type: ignore[misc]  # by_rank: specs with a part


def place(specs: list[AnalysisSpec], files: list[Path], in_rounds: bool = True) -> Placement:
    """Where each of ``specs`` runs: by rank when it has a part and a join; in rounds when it
    declares them, ``in_rounds`` and the run is big enough (:func:`rounds_for`); else in one
    process. An analysis that runs whole does not keep the others from their rounds."""
    by_rank = [s for s in specs if s.part is not None and s.join is not None]
    rest = [s for s in specs if s not in by_rank]
    rounds = rounds_for(rest, files) if in_rounds else []
    return Placement([s for s in rest if s not in rounds], by_rank, rounds)


def rounds_for(run: list[AnalysisSpec], files: list[Path]) -> list[AnalysisSpec]:
    """The analyses of ``run`` that run in rounds where the ranks are read, so that no
    timeline of theirs travels: those that declare ``rounds``; none when one of them runs in
    rounds on big runs only (``big_runs_only``: the what-if) and the run has less than
    :func:`min_bytes` of traces (below, the timelines travel and all run in one process:
    docs/scale.md)."""
    declared = [a for a in run if a.rounds is not None]
    if any(a.rounds.big_runs_only for a in declared if a.rounds is not None) and \
            sum(f.stat().st_size for f in trace_files(files)) < min_bytes():
        return []
    return declared
