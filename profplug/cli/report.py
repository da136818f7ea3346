"""``profplug report PATH...``: the per-rank stall report of Kineto or Nsight traces."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Annotated

import typer

from profplug.errors import ProfplugError, one_line

from .main import app
from .output import write_text


def write_html(rep: object, html: Path, whatif: object = None) -> None:
    try:
        from profplug.analyzers.render.html import render_html
    except ImportError:
        print("profplug: HTML report not available in this version", file=sys.stderr)
        return
    buf = io.StringIO()
    render_html(rep, buf, whatif=whatif)  # type: ignore[arg-type]
    write_text(buf.getvalue(), html)
    print(f"profplug: wrote {one_line(html)}", file=sys.stderr)


def print_report(paths: list[Path], html: Path | None = None, fmt: str = "table",
                 output: Path | None = None, tolerance_us: float = 2.0,
                 strict: bool = False, jobs: int | None = None, whatif: bool = False,
                 nsys: str | None = None, max_decompressed: str | None = None) -> int:
    """Analyze ``paths`` and print (or write) the report; returns the exit code.

    ``whatif``: also replay the run without its device-wide synchronizes (the ``whatif`` key
    of the JSON, a section of the table and of the HTML). ``nsys``: the nsys executable used
    to export ``.nsys-rep`` files (default: ``$PROFPLUG_NSYS``, then PATH).
    ``max_decompressed``: most bytes a ``.gz`` may inflate to (``"8G"``...).
    """
    import os

    from profplug.analyzers.load import load_timelines
    from profplug.analyzers.readers.limits import set_max_decompressed
    from profplug.analyzers.render import RENDERERS
    from profplug.analyzers.report import analyze_timelines, find_run_meta
    from profplug.analyzers.stalls import StallOptions

    if fmt not in RENDERERS:
        raise ProfplugError(f"unknown format {fmt!r} (choose from {', '.join(RENDERERS)})")
    if nsys:
        os.environ["PROFPLUG_NSYS"] = nsys
    set_max_decompressed(max_decompressed)
    opts = StallOptions(tolerance_ns=round(tolerance_us * 1000))
    timelines = load_timelines(paths, jobs=jobs)
    rep = analyze_timelines(timelines, opts)
    rep.meta = find_run_meta(list(paths))
    res = None
    if whatif:
        from profplug.analyzers.whatif import whatif as replay

        res = replay(timelines, None, opts)
    buf = io.StringIO()
    if fmt == "json" and res is not None:
        from profplug.analyzers.render.jsonout import render_json

        render_json(rep, buf, extra={"whatif": res.to_dict()})
    else:
        RENDERERS[fmt](rep, buf)
    if fmt == "table" and res is not None:
        from profplug.analyzers.whatif import render_table as whatif_table

        buf.write("\n")
        whatif_table(res, buf)
    write_text(buf.getvalue(), output)
    if html is not None:
        write_html(rep, html, res)
    problems = [f"rank {r.rank}: {w}" for r in rep.ranks for w in r.warnings]
    missing = rep.meta.get("missing_ranks")
    if missing:  # profplug run: ranks of the world that left no trace (SIGKILL, OOM...)
        print(f"profplug: warning: missing ranks: {one_line(missing)} (run.json: no trace "
              "for them)", file=sys.stderr)
    if fmt != "table":
        for p in problems:
            print(f"profplug: warning: {one_line(p)}", file=sys.stderr)
    if strict and (problems or missing or any(r.skipped for r in rep.ranks)):
        print("profplug: --strict: the traces had warnings or skipped events", file=sys.stderr)
        return 1
    return 0


@app.command()
def report(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or directories (one rank "
                                                     "per Kineto file; Nsight: all ranks).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json | csv")] = "table",
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the report here.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML report.")
                    ] = None,
    tolerance_us: Annotated[float, typer.Option(
        "--tolerance-us", help="Clock slack when matching a gap to a sync call.")] = 2.0,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Exit 1 if any trace was truncated or had skipped events.")] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Parallel parsers.")] = None,
    whatif: Annotated[bool, typer.Option(
        "--whatif", help="Also predict each rank's step time without its device-wide "
                         "synchronizes (see `profplug whatif`).")] = False,
    nsys: Annotated[str | None, typer.Option(
        "--nsys", help="nsys executable to export .nsys-rep files (default: $PROFPLUG_NSYS, "
                       "then PATH).")] = None,
    max_decompressed: Annotated[str | None, typer.Option(
        "--max-decompressed", help="Most bytes a .gz trace may inflate to (e.g. 8G; default "
                                   "2G, or $PROFPLUG_MAX_DECOMPRESSED).")] = None,
) -> None:
    """Per-rank GPU idle time by cause, sync API and call site."""
    code = print_report(paths, html, fmt, output, tolerance_us, strict, jobs, whatif, nsys,
                        max_decompressed)
    if code:
        raise typer.Exit(code)
