"""What a trace reader is: the file name endings it claims and ``read(path, index, options)``.

Readers are listed once, in ``registry.READERS``; ``load`` finds the reader of a file by its
name there. ``ReadOptions`` travels with every read (also to the worker processes that read
files in parallel), so nothing reaches a reader through the environment (but the documented
defaults: `$PROFPLUG_NSYS`, `$PROFPLUG_MAX_DECOMPRESSED`, `$PROFPLUG_CACHE`, read where
`load` starts).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.limits import parse_size
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule


@dataclass(frozen=True)
class ReadOptions:
    """How to read traces (the same for every file of a run)."""

    nsys: str | None = None  # nsys exporting .nsys-rep files; None: $PROFPLUG_NSYS, then PATH
    steps: StepRule = DEFAULT_STEPS  # which host ranges are steps (``--step-range``)
    # most bytes a .gz may inflate to (``--max-decompressed``); None: the documented default
    # ($PROFPLUG_MAX_DECOMPRESSED, else 2 GiB; ``limits.max_decompressed``)
    max_decompressed: int | None = None
    # the per-rank cache's folder (``--cache DIR``; ``readers.cache``); None: $PROFPLUG_CACHE
    # when set (settled where ``load`` starts), else no cache
    cache_dir: str | None = None

    def with_step_range(self, spec: str | None) -> ReadOptions:
        """These options with the step rule of ``--step-range SPEC`` (None: unchanged)."""
        return self if spec is None else replace(self, steps=StepRule.parse(spec))

    def with_max_decompressed(self, size: str | None) -> ReadOptions:
        """These options with the budget of ``--max-decompressed SIZE`` (``"8G"``; None:
        unchanged); a bad size is a ProfplugError."""
        return self if size is None else replace(self, max_decompressed=parse_size(size))

    def with_cache(self, folder: str | Path | None) -> ReadOptions:
        """These options with the per-rank cache in ``folder`` (None: unchanged)."""
        return self if folder is None else replace(self, cache_dir=str(folder))


class Reader(Protocol):
    """One trace format: a file in, one Timeline per rank it holds out."""

    name: str  # the ``Timeline.source`` it produces
    suffixes: tuple[str, ...]  # lower-case file name endings it reads

    def read(self, path: Path, index: int, options: ReadOptions) -> list[Timeline]:
        """Read ``path``, the ``index``-th trace file of the run (a rank of last resort).

        Raises TraceError with a one-line reason naming the file.
        """
        ...
