"""``profplug compare RUN_A RUN_B``: two runs side by side per rank (e.g. device vs event)."""

from __future__ import annotations

from typing import Annotated

import typer

from profplug.cli.app import app
from profplug.cli.options import (
    DEFAULT_TOLERANCE_US,
    Cache,
    CrossRank,
    Dask,
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
def compare(
    ctx: typer.Context,
    run_a: Annotated[str, typer.Argument(help="Run A: directory, trace file, or f1,f2,...")],
    run_b: Annotated[str, typer.Argument(help="Run B: directory, trace file, or f1,f2,...")],
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help="table | json (default: from -o's extension, .json or .csv; else "
                               "table)")] = None,
    output: Output = None,
    html: Html = None,
    label_a: Annotated[str | None, typer.Option("--label-a", help="Name of run A.")] = None,
    label_b: Annotated[str | None, typer.Option("--label-b", help="Name of run B.")] = None,
    tolerance_us: Tolerance = DEFAULT_TOLERANCE_US,
    step_range: StepRange = None,
    nsys: Nsys = None,
    max_decompressed: MaxDecompressed = None,
    whatif: Annotated[bool | None, typer.Option(
        "--whatif/--no-whatif", help="Each run's what-if, as in `profplug report`.")] = None,
    cross_rank: CrossRank = True,
    jobs: Jobs = None,
    dask: Dask = None,
    cache: Cache = None,
    quiet: Quiet = False,
    trace_out: TraceOut = None,
    trace_full: TraceFull = False,
    trace_steps: TraceSteps = None,
) -> None:
    """Two runs side by side per rank: step time, idle by cause, syncs, and deltas."""
    from profplug.analyzers.commands.compare import run_compare
    from profplug.analyzers.readers.base import ReadOptions
    from profplug.analyzers.stalls.rank import StallOptions

    code = run_compare(run_a, run_b, fmt=fmt, output=output, html=html,
                       options=StallOptions.from_tolerance_us(tolerance_us),
                       labels=(label_a, label_b),
                       read=ReadOptions(nsys=nsys).with_step_range(step_range)
                       .with_max_decompressed(max_decompressed).with_cache(cache),
                       whatif=whatif, cross_rank=cross_rank, jobs=jobs, dask=dask,
                       quiet=quiet, trace_out=trace_out, trace=trace_ask(trace_full, trace_steps, ctx))
    if code:
        raise typer.Exit(code)
