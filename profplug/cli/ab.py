"""``profplug ab -o DIR [options] -- CMD ...``: an A/B of sync policies over unprofiled
runs (policies switched inside each run, or separate runs in a counterbalanced order), with step-time CIs and an output-equality check; ``profplug ab-report
DIR``: the same analysis of an existing A/B's ``DIR/ab.json``, running nothing
(docs/ab.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profplug.cli.app import app


@app.command(
    context_settings={"allow_interspersed_args": False},
    no_args_is_help=True,
)
def ab(
    command: Annotated[list[str], typer.Argument(help="the job, after --", show_default=False)],
    output: Annotated[Path, typer.Option("-o", "--output", help="output directory DIR")],
    policies: Annotated[str, typer.Option(
        help="sync policies to compare, device (the baseline) among them: "
             "device,event[,none]")] = "device,event",
    rounds: Annotated[int, typer.Option(help="runs of every policy")] = 5,
    skip: Annotated[int, typer.Option(help="steps before the timed window")] = 20,
    steps: Annotated[int, typer.Option(help="steps timed in every run")] = 100,
    order: Annotated[str, typer.Option(
        help="separate runs: counterbalanced (each policy in each position equally often), "
             "random (shuffled per round, seed recorded) or interleaved (ABAB...)")] = (
        "counterbalanced"),
    switch_every: Annotated[int | None, typer.Option(
        "--switch-every", metavar="N",
        help="alternate the policies in blocks of N steps inside each run (default 10; "
             "0: one policy per run, separate runs)")] = None,
    aa: Annotated[bool, typer.Option(
        "--aa", help="an A/A check: device against itself (--policies device,device)")] = False,
    seed: Annotated[int | None, typer.Option(help="seed of --order random")] = None,
    html: Annotated[Path | None, typer.Option(
        "--html", help="also write the HTML page (distributions, CI bars)")] = None,
    whatif: Annotated[str | None, typer.Option(
        "--whatif", metavar="RUN",
        help="a traced device run: draw its what-if prediction against the measurement")] = None,
    patch: Annotated[str, typer.Option(
        help="patches: megatron,transformers (default), with synchronize, or none")] = (
        "megatron,transformers"),
    step_fn: Annotated[list[str] | None, typer.Option(
        "--step-fn", metavar="MODULE:QUALNAME",
        help="each outermost call of this function is a step (repeatable)")] = None,
    sync_site: Annotated[list[str] | None, typer.Option(
        "--sync-site", metavar="MODULE:QUALNAME",
        help="a function whose torch.cuda.synchronize() calls are the pipeline's: the "
             "policies apply to them (repeatable)")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite a non-empty DIR")] = False,
) -> None:
    """Run CMD rounds x policies times without a profiler, time every step, compare."""
    from profplug.analyzers.commands.ab_report import ab_inputs
    from profplug.analyzers.commands.outpaths import STDOUT, check_outputs
    from profplug.session.abrun import AbOptions, run_ab

    check_outputs([Path(STDOUT), html], ab_inputs(output, whatif))  # before any run
    rc = run_ab(AbOptions(
        out=output, command=list(command), policies=policies, rounds=rounds, skip=skip,
        steps=steps, order=order, seed=seed, switch_every=switch_every, aa=aa, patches=patch, step_fns=list(step_fn or []),
        sync_sites=list(sync_site or []), html=html, whatif=whatif, force=force,
    ))
    raise typer.Exit(code=rc)


@app.command("ab-report", no_args_is_help=True)
def ab_report(
    directory: Annotated[Path, typer.Argument(
        metavar="DIR", help="the -o DIR of a profplug ab (its ab.json)", show_default=False)],
    html: Annotated[Path | None, typer.Option(
        "--html", help="also write the HTML page (distributions, CI bars)")] = None,
    whatif: Annotated[str | None, typer.Option(
        "--whatif", metavar="RUN",
        help="a traced device run: a new what-if prediction against the measurement (else "
             "the one in ab.json, if any, is compared again)")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
    rewrite: Annotated[bool, typer.Option(
        "--rewrite", help="store this analysis in DIR/ab.json (default: read it only)")] = False,
) -> None:
    """Analyze DIR/ab.json's runs again (statistics, verdicts, output check), print the table
    (or -f json), write --html. Runs nothing; DIR/ab.json is rewritten only with --rewrite."""
    from profplug.analyzers.commands.ab_report import report_ab

    raise typer.Exit(code=report_ab(directory, html=html, whatif=whatif, fmt=fmt,
                                    rewrite=rewrite))
