"""``profplug whatif RUN...``: each rank's step time if its synchronizes did not block."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profplug.cli.app import app
from profplug.cli.options import (
    DEFAULT_TOLERANCE_US,
    RUN_PATHS,
    Cache,
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
def whatif(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help=RUN_PATHS)],
    drop: Drop = "policy",
    drop_at: Annotated[str | None, typer.Option(
        "--drop-at", help="Only the syncs at this call site (as `profplug report` names "
                          "it).")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help="table | json (default: from -o's extension, .json or .csv; else "
                               "table)")] = None,
    output: Output = None,
    html: Html = None,
    tolerance_us: Tolerance = DEFAULT_TOLERANCE_US,
    jobs: Jobs = None,
    unprofiled: Annotated[str | None, typer.Option(
        "--unprofiled", help="The job's measured step time without a profiler, with its "
                             "synchronizes (us): predict the step users run at. 'auto': the "
                             "untraced median step that `profplug run` recorded around its "
                             "window (run.json); a `profplug ab` directory: its device "
                             "median, CI and paired speedup CI, as `ab --whatif`.")] = None,
    unprofiled_ci: Annotated[str | None, typer.Option(
        "--unprofiled-ci", metavar="LO,HI",
        help="That step's 95% CI (us), e.g. `profplug ab`'s device CI: the band then carries "
             "the prediction's change across it, as `ab --whatif` does.")] = None,
    against: Annotated[str | None, typer.Option(
        "--against", metavar="OTHER",
        help="A traced run of the other policy (e.g. the event run): line the prediction up "
             "with it by call and step, per rank, and name where they part most.")] = None,
    step_range: StepRange = None,
    nsys: Nsys = None,
    max_decompressed: MaxDecompressed = None,
    dask: Dask = None,
    cache: Cache = None,
    quiet: Quiet = False,
    trace_out: TraceOut = None,
    trace_full: TraceFull = False,
    trace_steps: TraceSteps = None,
) -> None:
    """Predict each rank's step time with the synchronizes made non-blocking."""
    from profplug.analyzers.commands.whatif import run_whatif
    from profplug.analyzers.readers.base import ReadOptions
    from profplug.analyzers.stalls.rank import StallOptions
    from profplug.analyzers.whatif import DropSpec

    code = run_whatif(paths, drop=DropSpec(drop, drop_at), fmt=fmt, output=output, html=html,
                      options=StallOptions.from_tolerance_us(tolerance_us), jobs=jobs,
                      unprofiled_us=unprofiled, unprofiled_ci=unprofiled_ci,
                      read=ReadOptions(nsys=nsys).with_step_range(step_range)
                      .with_max_decompressed(max_decompressed).with_cache(cache),
                      dask=dask, quiet=quiet, against_run=against, trace_out=trace_out,
                      trace=trace_ask(trace_full, trace_steps, ctx))
    if code:
        raise typer.Exit(code)
