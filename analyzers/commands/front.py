"""The Python API's front object: one run's traces, opened once, and every figure the commands
print one attribute away (tab completion and docstrings in a notebook).

    >>> from profplug.analyzers import open_run
    >>> run = open_run("sample_traces/pp2_infer_kineto/device")
    >>> run.headline                     # the finding, as the report's first line
    >>> run.stalls                       # DataFrame: one row per rank, times in us
    >>> run.whatif().rank(0).predicted_us
    >>> run.compare(open_run("sample_traces/pp2_infer_kineto/event")).verdict()
    >>> run.render_html("report.html")

Nothing here computes a figure: the report is made once, on first use, by the function
``profplug report`` calls (``report.analysis.analyze`` with the registry's analyses,
``report.registry.report_analyses``), and each method reads it or hands it to the function
the commands use (``compare``: :func:`commands.compare.comparison`; pages and tables:
``render.registry``). docs/python-api.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from profplug.analyzers.commands.compare import comparison, run_label
from profplug.analyzers.commands.output import open_backend, write_text
from profplug.analyzers.compare.reports import Comparison
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.crossrank.result import CrossRankResult
from profplug.analyzers.graph.dropset import DropSpec
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.render.registry import PAGE, check_format, render_text
from profplug.analyzers.render.timeline_data import GAPS_KEPT
from profplug.analyzers.report import frames
from profplug.analyzers.report.analysis import Report, analyze
from profplug.analyzers.report.registry import check_drop, report_analyses
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.report.runsets import check_one_run
from profplug.analyzers.scale.pathargs import PathsLike, check_paths
from profplug.analyzers.stalls.rank import StallOptions
from profplug.analyzers.whatif.result import WhatIfResult

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Run:
    """One run's traces (every rank), opened by :func:`open_run`. Its report is made on
    first use and kept: every property and method below reads that one report."""

    paths: list[Path]  # the trace files and folders, as given
    label: str  # its name in a comparison (the folder's name by default)
    options: StallOptions = field(default_factory=StallOptions)
    read: ReadOptions = field(default_factory=ReadOptions)
    whatif_asked: bool | None = None  # the what-if: always, never, or when cheap (None)
    cross_rank_asked: bool = True
    drop: DropSpec = field(default_factory=DropSpec)  # what the what-if drops
    jobs: int | None = None  # local worker processes (None: one per usable CPU)
    dask: str | None = None  # a Dask cluster's address, or local[:N]
    _report: Report | None = field(default=None, repr=False, compare=False)

    def report(self) -> Report:
        """The run's report, as ``profplug report`` makes it: the ranks' stall analyses
        (``Report.ranks``), the run-level results (``Report.run``: ``whatif``,
        ``cross_rank``...), the warnings; ``Report.to_dict()`` is the JSON report."""
        if self._report is None:
            backend = open_backend(self.jobs, self.dask)
            try:
                self._report = analyze(
                    self.paths, self.options, read=self.read, backend=backend,
                    run=report_analyses(self.whatif_asked, self.cross_rank_asked, self.drop),
                    keep_gaps=True, gaps_per_device=GAPS_KEPT)
            finally:
                backend.close()
        return self._report

    @property
    def headline(self) -> str:
        """The finding in one sentence (the report's first line)."""
        return self.report().headline()

    @property
    def warnings(self) -> list[str]:
        """The run's warnings (each rank's own are on ``report().ranks[i].warnings``)."""
        return list(self.report().warnings)

    @property
    def stalls(self) -> pd.DataFrame:
        """One row per rank: GPU window, busy, compute, comm and idle time, idle by cause
        (``device_sync_us``, ``event_sync_us``, ``host_bound_us``, ``other_us``) and the
        step time (``step_us``), all in us (docs/costs.md)."""
        return frames.ranks_frame(self.report())

    @property
    def callsites(self) -> pd.DataFrame:
        """One row per rank and call site of a blocking call: its calls and the GPU idle they
        caused, in us."""
        return frames.callsites_frame(self.report())

    @property
    def gaps(self) -> pd.DataFrame:
        """One row per GPU idle gap (the longest per device): start, end and length in ns on
        the rank's clock, its cause and the call that caused it."""
        return frames.gaps_frame(self.report())

    def whatif(self) -> WhatIfResult:
        """The what-if of the report: each rank's step with the dropped synchronizes made
        non-blocking (``rank(r).recorded_us``, ``.predicted_us``, per step in us; the band in
        %). A ProfplugError when the report has none (``open_run(..., whatif=True)`` forces
        it on a big run; a run without GPU work has none)."""
        res = self.report().run.get(WhatIfResult.key)
        if not isinstance(res, WhatIfResult):
            raise ProfplugError(f"no what-if for {self.label}: " + _why(self.report(), "what-if"))
        return res

    def cross_rank(self) -> CrossRankResult:
        """The cross-rank analysis of the report: bubbles, critical path and drain (times in
        ns; docs/crossrank.md). A ProfplugError when the report has none (one rank, ranks
        that cannot be joined, or ``cross_rank=False``)."""
        res = self.report().run.get(CrossRankResult.key)
        if not isinstance(res, CrossRankResult):
            raise ProfplugError(f"no cross-rank analysis for {self.label}: "
                                + _why(self.report(), "cross-rank"))
        return res

    def compare(self, other: Run) -> Comparison:
        """This run (A) and ``other`` (B) side by side per rank, as ``profplug compare A B``:
        step times in us, B - A, the verdict (``.verdict()``), ``.to_dict()`` its JSON."""
        return comparison(self.report(), other.report(), self.paths, other.paths,
                          (self.label, other.label), self.options, self.read)

    def render(self, fmt: str = "table") -> str:
        """The report as ``profplug report -f FMT`` writes it: table, json or csv."""
        return render_text(self.report(), check_format(Report, fmt))

    def render_html(self, path: str | Path) -> Path:
        """Write the report's HTML page (``profplug report --html``) to ``path``, whole or not
        at all; returns the path."""
        write_text(render_text(self.report(), PAGE), Path(path))
        return Path(path)


def _why(rep: Report, what: str) -> str:
    """The report's warnings about ``what`` (the reason an analysis is not there), else
    the rule."""
    said = [w for w in rep.warnings if what in w]
    return "; ".join(said) if said else "it does not apply to this run (docs/python-api.md)"


def open_run(paths: PathsLike, *, whatif: bool | None = None, cross_rank: bool = True,
             drop: str = "policy", step_range: str | None = None,
             tolerance_us: float = 2.0, jobs: int | None = None, dask: str | None = None,
             cache: str | Path | None = None, label: str | None = None) -> Run:
    """A run's traces (a folder, a file, or several; every rank of one run), checked now
    (missing paths, a run.json it cannot use, traces of several runs: one-line errors) and
    read on first use. The options are ``profplug report``'s: ``whatif`` (True, False, or
    None: when cheap), ``cross_rank``, ``drop`` (``policy``, ``device-sync``, ``all-sync``),
    ``step_range``, ``tolerance_us`` (the host/GPU clock slack, in us), ``jobs``,
    ``dask``, ``cache`` (the per-rank cache's folder)."""
    files = check_paths(paths)
    find_run_meta(files)
    check_one_run(files)
    read = ReadOptions().with_step_range(step_range).with_cache(cache)
    return Run(paths=files, label=label or run_label(str(files[0])),
               options=StallOptions.from_tolerance_us(tolerance_us), read=read,
               whatif_asked=whatif, cross_rank_asked=cross_rank,
               drop=check_drop(DropSpec(drop)), jobs=jobs, dask=dask)
