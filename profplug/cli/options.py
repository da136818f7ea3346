"""Options that several commands share (typer ``Annotated`` aliases), declared once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from profplug.analyzers.render.chrometrace.export import TraceAsk

DEFAULT_TOLERANCE_US = 2.0  # stalls.rank.DEFAULT_TOLERANCE_NS, in us

Output = Annotated[Path | None, typer.Option("-o", "--output",
                                             help="Write it here instead of stdout (- is stdout).")]
Html = Annotated[Path | None, typer.Option("--html", help="Also write an HTML report.")]
Tolerance = Annotated[float, typer.Option(
    "--tolerance-us", help="Clock slack when matching a gap to a sync call (>= 0).")]
Jobs = Annotated[int | None, typer.Option(
    "--jobs", "-j", help="Parallel parsers (default: one per CPU; none for a run under 32 MB).")]
StepRange = Annotated[str | None, typer.Option(
    "--step-range", help="The host range that marks a step in the traces: its exact name "
                         "(a record_function or NVTX range, e.g. decode_step) or re:REGEX. "
                         "Default: ProfilerStep#N, else profplug.step. One matching "
                         "no range on any rank is an error naming the ranges there.")]
Nsys = Annotated[str | None, typer.Option(
    "--nsys", help="nsys executable to export .nsys-rep files (default: $PROFPLUG_NSYS, "
                   "then PATH).")]
RUN_PATHS = ("Trace files or directories of one run (all ranks); files may be joined by "
             "commas, f1,f2, as in `profplug compare`.")
CrossRank = Annotated[bool, typer.Option(
    "--cross-rank/--no-cross-rank", help="Bubbles, critical path and drain across ranks "
                                          "(default on).")]
Drop = Annotated[str, typer.Option(
    "--drop", help="Which syncs the what-if stops blocking: policy (default: the device-wide "
                   "synchronizes inside the pipeline send/recv, what the sync policy changes; "
                   "every device-wide one when the trace has no such call site) | "
                   "device-sync (every device-wide one) | all-sync (every host-blocking "
                   "sync).")]
MaxDecompressed = Annotated[str | None, typer.Option(
    "--max-decompressed", help="Most bytes a .gz trace may inflate to (e.g. 8G; default 2G, "
                               "or $PROFPLUG_MAX_DECOMPRESSED).")]
Dask = Annotated[str | None, typer.Option(
    "--dask", help="Read and analyze the ranks on a Dask cluster: tcp://HOST:PORT, a "
                   "scheduler file, or local[:N] (N local worker processes). Needs "
                   "pip install 'profplug[dask]'. Default: local processes.")]
Cache = Annotated[Path | None, typer.Option(
    "--cache", help="Keep each rank's parsed timeline in this folder and reuse it while the "
                    "trace is unchanged (default: $PROFPLUG_CACHE, else no cache).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress line on stderr.")]
TraceOut = Annotated[Path | None, typer.Option(
    "--trace-out", help="Also write one merged, annotated trace of all ranks (Chrome Trace "
                        "Event Format; gzip when FILE ends in .gz) for Perfetto UI or "
                        "chrome://tracing: the idle gaps by cause, the waits across ranks, "
                        "the critical path and the predicted timeline drawn in.")]
TraceFull = Annotated[bool, typer.Option(
    "--trace-full", help="--trace-out: the whole recorded trace, not only the analyzed "
                         "window, and the predicted processes' host calls.")]
TraceSteps = Annotated[int | None, typer.Option(
    "--trace-steps", min=1, help="--trace-out: only N consecutive complete steps (from the "
                                 "second), the same span on every rank.")]


def trace_ask(full: bool, steps: int | None, ctx: typer.Context) -> TraceAsk:
    """What ``--trace-out`` writes, with the command line for its metadata (``ctx``: the
    command's, which carries what ``cli.main.main`` was given)."""
    from profplug.analyzers.render.chrometrace.export import TraceAsk
    from profplug.cli.app import command_line

    return TraceAsk(full=full, steps=steps, command=command_line(ctx))
