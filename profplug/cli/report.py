"""``profplug report PATH...``: the per-rank stall report of Kineto or Nsight traces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profplug.cli.app import app
from profplug.cli.options import (
    DEFAULT_TOLERANCE_US,
    RUN_PATHS,
    Cache,
    CrossRank,
    Dask,
    Drop,
    Html,
    Jobs,
    MaxDecompressed,
    Nsys,
    Output,
    Quiet,
    StepRange,
    Tolerance,
    TraceFull,
    TraceOut,
    TraceSteps,
    trace_ask,
)


@app.command()
def report(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help=RUN_PATHS)],
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help="table | json | csv (default: from -o's extension, .json or .csv; else "
                               "table)")] = None,
    output: Output = None,
    html: Html = None,
    tolerance_us: Tolerance = DEFAULT_TOLERANCE_US,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Exit 1 if any trace was truncated or had skipped events.")] = False,
    jobs: Jobs = None,
    whatif: Annotated[bool | None, typer.Option(
        "--whatif/--no-whatif", help="Predict each rank's step time without the synchronizes "
                                     "--drop names (see `profplug whatif`); by default when "
                                     "the run has at most 2M events.")] = None,
    cross_rank: CrossRank = True,
    drop: Drop = "policy",
    nsys: Nsys = None,
    step_range: StepRange = None,
    max_decompressed: MaxDecompressed = None,
    dask: Dask = None,
    cache: Cache = None,
    quiet: Quiet = False,
    trace_out: TraceOut = None,
    trace_full: TraceFull = False,
    trace_steps: TraceSteps = None,
) -> None:
    """Per-rank GPU idle time by cause, sync API and call site."""
    from profplug.analyzers.commands.report import run_report
    from profplug.analyzers.readers.base import ReadOptions
    from profplug.analyzers.stalls.rank import StallOptions
    from profplug.analyzers.whatif import DropSpec

    code = run_report(paths, fmt=fmt, output=output, html=html,
                      options=StallOptions.from_tolerance_us(tolerance_us),
                      read=ReadOptions(nsys=nsys).with_step_range(step_range)
                      .with_max_decompressed(max_decompressed).with_cache(cache), jobs=jobs,
                      whatif=whatif, strict=strict, cross_rank=cross_rank, dask=dask,
                      quiet=quiet, drop=DropSpec(drop), trace_out=trace_out,
                      trace=trace_ask(trace_full, trace_steps, ctx))
    if code:
        raise typer.Exit(code)
