"""``profplug report`` once its options are parsed: read, analyze (the registry's run-level
analyses, ``report.registry``), render through ``render.registry``, write, and return the exit
code. Nothing here sees argv; warnings for the user go to stderr, one line each."""

from __future__ import annotations

import sys
from pathlib import Path

from profplug.analyzers.commands.libwarnings import own_warnings
from profplug.analyzers.commands.outpaths import check_cache, check_outputs, stdout_or
from profplug.analyzers.commands.output import (
    check_trace_out,
    open_backend,
    output_format,
    progress_flag,
    write_page,
    write_text,
    write_trace,
)
from profplug.analyzers.core.errors import one_line
from profplug.analyzers.core.vocabulary import Format
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.render.chrometrace.export import TraceAsk
from profplug.analyzers.render.registry import check_format, render_text
from profplug.analyzers.render.timeline_data import GAPS_KEPT
from profplug.analyzers.report.analysis import Report, analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.report.runsets import check_one_run
from profplug.analyzers.scale.pathargs import PathsLike, check_paths
from profplug.analyzers.stalls.rank import StallOptions
from profplug.analyzers.whatif import (
    DropSpec,
)


@own_warnings
def run_report(paths: PathsLike, *, fmt: str | None = None, output: Path | None = None,
               html: Path | None = None, options: StallOptions | None = None,
               read: ReadOptions | None = None, jobs: int | None = None,
               whatif: bool | None = None, strict: bool = False,
               cross_rank: bool = True, drop: DropSpec | None = None,
               dask: str | None = None, quiet: bool = False, trace_out: Path | None = None,
               trace: TraceAsk | None = None) -> int:
    """The stall report of the traces under ``paths``; returns the exit code.

    ``whatif``: also replay the run without its device-wide synchronizes (the ``whatif`` key
    of the JSON, a section of the table and of the HTML, and the headline's indirect cost);
    None (the default): when the run is small enough for it to take seconds at most
    (:func:`whatif_if_cheap`). ``cross_rank`` (default on; linear in the trace): bubbles,
    critical path and drain across ranks (the ``cross_rank`` key, and ``comm_transfer_us``/
    ``comm_wait_us``/``bubble_us`` in each rank). ``strict``: 1 when a trace had warnings
    or skipped events, or ranks are missing. ``drop``: what the what-if drops (``--drop``).
    ``dask``: read and analyze the ranks on that Dask cluster (``--dask``; default: local
    processes); ``quiet``: no progress line. ``trace_out``: also the merged, annotated trace
    of all ranks (``render.chrometrace``; ``trace``: which part), made from the report's own
    objects: the report then keeps its Timelines and the what-if its predicted ones.
    """
    fmt = output_format(fmt, output)
    fmt = check_format(Report, fmt)
    files = check_paths(paths)
    check_outputs((stdout_or(output), html, check_trace_out(trace_out)), files)
    check_cache(None if read is None else read.cache_dir, files)
    find_run_meta(files)  # a run.json it cannot use: said now, not after the whole read
    check_one_run(files)
    backend = open_backend(jobs, dask)
    try:
        # the idle gaps travel back only for a page, and no more than it draws
        rep = analyze(files, options, read=read,
                      run=report_analyses(whatif, cross_rank, drop, trace_out is not None),
                      backend=backend, progress=progress_flag(quiet), keep_gaps=html is not None,
                      gaps_per_device=GAPS_KEPT, keep_timelines=trace_out is not None)
    finally:
        backend.close()
    write_text(render_text(rep, fmt), output)
    if html is not None:
        write_page(rep, html)
    if trace_out is not None:
        write_trace([("", rep)], trace_out, trace or TraceAsk())
    problems = [f"rank {r.rank}: {w}" for r in rep.ranks for w in r.warnings]
    problems += rep.warnings
    missing = rep.meta.get("missing_ranks")
    if missing:  # profplug run: ranks of the world that left no trace (SIGKILL, OOM...)
        print(f"profplug: warning: missing ranks: {one_line(missing)} (run.json: no trace "
              "for them)", file=sys.stderr)
    if fmt != Format.TABLE:  # the table shows them itself
        for p in problems:
            print(f"profplug: warning: {one_line(p)}", file=sys.stderr)
    trace_problems = any(r.warnings or r.skipped for r in rep.ranks) or bool(rep.lost)
    if strict and (trace_problems or missing):
        print("profplug: --strict: the traces had warnings or skipped events", file=sys.stderr)
        return 1
    return 0
