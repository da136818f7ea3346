"""``profplug run -o DIR [options] -- CMD ...``: profile a job, then print its stall report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.vocabulary import TraceKind
from profplug.cli.app import app


@app.command(
    context_settings={"allow_interspersed_args": False},
    no_args_is_help=True,
)
def run(
    command: Annotated[list[str], typer.Argument(help="the job, after --", show_default=False)],
    output: Annotated[Path, typer.Option("-o", "--output", help="output directory DIR")],
    trace: Annotated[str, typer.Option(
        help="kineto (torch.profiler), nsys, or none (patches and sync policy only)")] = "kineto",
    sync: Annotated[str, typer.Option(help="p2p sync policy: keep|device|event|none")] = "keep",
    patch: Annotated[str, typer.Option(
        help="patches: any of megatron,transformers,synchronize, or none")] = (
        "megatron,transformers,synchronize"
    ),
    step_fn: Annotated[list[str] | None, typer.Option(
        "--step-fn", metavar="MODULE:QUALNAME",
        help="each outermost call of this function is a step (repeatable); MODULE may be "
             "__main__ or the script's path for the script's own function")] = None,
    sync_site: Annotated[list[str] | None, typer.Option(
        "--sync-site", metavar="MODULE:QUALNAME",
        help="a function whose torch.cuda.synchronize() calls are the pipeline's: annotated, "
             "the --sync policy applied (repeatable)")] = None,
    skip: Annotated[int, typer.Option(help="steps before the window")] = 10,
    steps: Annotated[int, typer.Option(help="steps in the profiling window")] = 50,
    cpu_ops: Annotated[bool, typer.Option("--cpu-ops", help="Kineto: record every CPU op")] = False,
    nsys: Annotated[str | None, typer.Option(help="nsys executable (default: PATH)")] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="skip the report")] = False,
    force: Annotated[bool, typer.Option("--force", help="overwrite a non-empty DIR")] = False,
) -> None:
    """Run CMD with profplug active in every Python process; exit with CMD's status (7 when
    it exited 0 but nothing was profiled: no step opened the profiling window, or no trace
    was written; the reason on one line)."""
    from profplug.analyzers.scale.pathargs import FLAG_VALUES

    if command and command[0].lower() in FLAG_VALUES:
        raise ProfplugError(
            f"the command {command[0]!r} looks like a flag's value: flags take no value "
            f"(--no-report, not --no-report {command[0]}); to run it, give its path "
            f"(/bin/{command[0]})")
    from profplug.session.launch import RunOptions
    from profplug.session.launch import run as launch

    kind = TraceKind.parse(trace, "--trace", ProfplugError)
    rc = launch(RunOptions(
        out=output, command=list(command), trace=kind, sync=sync, patches=patch,
        step_fns=list(step_fn or []), sync_sites=list(sync_site or []), skip=skip,
        steps=steps, cpu_ops=cpu_ops, nsys=nsys, report=not no_report, force=force,
    ))
    raise typer.Exit(code=rc)
