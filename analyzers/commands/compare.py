"""``profplug compare A B`` once its options are parsed: two runs side by side, or a run's
prediction against an ``ab`` directory's measured policies; returns the exit code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
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
from profplug.analyzers.compare.ab_runs import (
    AbComparison,
    compare_ab,
    device_step,
    is_ab_dir,
    load_ab,
    pick_policy,
    speedup_ci,
)
from profplug.analyzers.compare.against_run import (
    compare_against,
)
from profplug.analyzers.compare.process_speed import withhold_against
from profplug.analyzers.compare.reports import Comparison, compare
from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.render.chrometrace.export import TraceAsk
from profplug.analyzers.render.registry import check_format, render_text
from profplug.analyzers.render.timeline_data import GAPS_KEPT
from profplug.analyzers.report.analysis import Report, analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.report.runsets import check_one_run
from profplug.analyzers.scale.pathargs import run_paths
from profplug.analyzers.stalls.rank import StallOptions
from profplug.analyzers.whatif import (
    WhatIfResult,
)
from profplug.analyzers.whatif.analysis import Unprofiled, whatif_analysis


def run_label(run: str) -> str:
    """A run's default name: its directory's name, else its (first) file's stem."""
    p = Path(run.split(",")[0]) if not Path(run).exists() else Path(run)
    return p.name if p.is_dir() else p.name.split(".")[0]


@own_warnings
def run_compare(run_a: str, run_b: str, *, fmt: str | None = None, output: Path | None = None,
                html: Path | None = None, options: StallOptions | None = None,
                labels: tuple[str | None, str | None] = (None, None),
                read: ReadOptions | None = None, whatif: bool | None = None,
                cross_rank: bool = True, dask: str | None = None, quiet: bool = False,
                jobs: int | None = None, trace_out: Path | None = None,
                trace: TraceAsk | None = None) -> int:
    """Two runs (see :func:`run_paths`) side by side per rank; returns the exit code.

    Each run's report is the one :func:`run_report` makes (``whatif`` and ``cross_rank``
    as there). ``trace_out``: both runs in one merged trace, each a group of processes
    named by its label (``render.chrometrace``; ``trace``: which part).
    """
    if is_ab_dir(run_b) and trace_out is not None:
        raise ProfplugError("--trace-out draws two traced runs; an ab directory has no "
                            "trace to draw (use `profplug report A --trace-out`)")
    fmt = output_format(fmt, output)
    if is_ab_dir(run_b):  # B measured by profplug ab: the what-if against its CI
        return _compare_with_ab(run_a, run_b, fmt=fmt, output=output, html=html,
                                options=options, labels=labels, read=read)
    check_format(Comparison, fmt)
    opt = options or StallOptions()
    # the same analyses as `profplug report`, so each side is that run's report
    run = report_analyses(whatif, cross_rank, predicted=trace_out is not None)
    paths_a, paths_b = run_paths(run_a), run_paths(run_b)
    if is_ab_dir(run_a):
        _say_ab_as_a(run_a, run_b)
    check_outputs((stdout_or(output), html, check_trace_out(trace_out)), [*paths_a, *paths_b])
    check_cache(None if read is None else read.cache_dir, [*paths_a, *paths_b])
    find_run_meta(paths_a), find_run_meta(paths_b)  # a bad run.json: said before the read
    check_one_run(paths_a, "compare")
    check_one_run(paths_b, "compare")
    backend = open_backend(jobs, dask)
    try:
        # each big run's run-level analyses where its ranks are read, as its report
        # (``scale.placement``)
        side = partial(analyze, options=opt, read=read, run=run, backend=backend,
                       progress=progress_flag(quiet), keep_gaps=html is not None,
                       gaps_per_device=GAPS_KEPT, keep_timelines=trace_out is not None)
        rep_a, rep_b = (_side(which, label, partial(side, p))
                        for which, label, p in (("A", run_a, paths_a), ("B", run_b, paths_b)))
    finally:
        backend.close()
    cmp = comparison(rep_a, rep_b, paths_a, paths_b,
                     (labels[0] or run_label(run_a), labels[1] or run_label(run_b)), opt, read)
    if fmt != "table":  # the table leads with them itself
        for m in cmp.mismatches:
            print(f"profplug: warning: {one_line(m)}", file=sys.stderr)
    write_text(render_text(cmp, fmt), output)
    if html is not None:
        write_page(cmp, html)
    if trace_out is not None:
        write_trace([(cmp.label_a, rep_a), (cmp.label_b, rep_b)], trace_out,
                    trace or TraceAsk())
    return 0


def comparison(rep_a: Report, rep_b: Report, paths_a: list[Path], paths_b: list[Path],
               labels: tuple[str, str], options: StallOptions,
               read: ReadOptions | None = None) -> Comparison:
    """Two runs' reports side by side per rank (``compare.reports.compare``), with A's
    what-if lined up with B by call (``against``, from the runs' timelines under
    ``paths_a`` and ``paths_b``): what ``profplug compare`` writes."""
    cmp = compare(rep_a, rep_b, labels[0], labels[1])
    cmp.against = withhold_against(
        compare_against(rep_a.run.get(WhatIfResult.key), paths_a, paths_b, cmp.label_b, options, read),
        cmp.speed, cmp.label_a, cmp.label_b, say=False)  # the warnings say it once
    return cmp


def _side(which: str, run: str, read: Callable[[], Report]) -> Report:
    """One side's report; its error names the run (``--step-range X`` that only A has)."""
    try:
        return read()
    except ProfplugError as exc:
        msg = str(exc)
        if run in msg:
            raise
        raise type(exc)(f"run {which} ({one_line(run)}): {msg}") from None


def _say_ab_as_a(run_a: str, run_b: str) -> None:
    """A is an ab directory: say which traces in it are run A, and the order that sets a
    run's prediction against the A/B's measurement."""
    import os
    import shlex

    from profplug.analyzers.scale.load import trace_files

    try:
        held = sorted({os.path.relpath(f.parent, run_a) for f in trace_files([Path(run_a)])})
    except ProfplugError:
        held = []
    print(f"profplug: warning: {one_line(run_a)} is a profplug ab directory: run A is the "
          f"traced run in it ({one_line(', '.join(held) or 'no traces')}), not its "
          f"measurement; for the prediction against the A/B: profplug compare "
          f"{shlex.quote(run_b)} {shlex.quote(run_a)}", file=sys.stderr)


def _compare_with_ab(run_a: str, run_b: str, *, fmt: str, output: Path | None,
                     html: Path | None, options: StallOptions | None,
                     labels: tuple[str | None, str | None], read: ReadOptions | None) -> int:
    """``compare A AB_DIR``: A's what-if at ab's unprofiled device step against ab's
    measured policy (``compare.ab_runs``)."""
    check_format(AbComparison, fmt)
    check_outputs((stdout_or(output), html), [*run_paths(run_a), Path(run_b)])
    doc = load_ab(Path(run_b))
    policy = pick_policy(doc)
    dev_us, dev_ci = device_step(doc)
    ratio = speedup_ci(doc, policy)
    opt = options or StallOptions()

    unprofiled = whatif_analysis(unprofiled=Unprofiled(dev_us, dev_ci, ratio))

    rep_a = analyze(run_paths(run_a), opt, read=read, run=[unprofiled])
    res = compare_ab(rep_a, doc, labels[0] or run_label(run_a), labels[1] or run_label(run_b),
                     policy, dev_us)
    write_text(render_text(res, fmt), output)
    if html is not None:
        write_page(res, html)
    return 0
