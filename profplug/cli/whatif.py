"""``profplug whatif RUN...``: each rank's step time if its synchronizes did not block."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Annotated

import typer

from profplug.errors import ProfplugError

from .main import app
from .output import write_text

FORMATS = ("table", "json")
DROPS = ("device-sync", "all-sync")


def run_whatif(paths: list[Path], drop: str = "device-sync", drop_at: str | None = None,
               fmt: str = "table", output: Path | None = None, html: Path | None = None,
               tolerance_us: float = 2.0, jobs: int | None = None,
               max_decompressed: str | None = None) -> int:
    """Replay the run under ``paths`` without the chosen syncs and print the comparison."""
    from profplug.analyzers.readers.limits import set_max_decompressed
    from profplug.analyzers.stalls import StallOptions
    from profplug.analyzers.whatif import DropSpec, render_table, whatif_paths

    if fmt not in FORMATS:
        raise ProfplugError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    if drop not in DROPS:
        raise ProfplugError(f"unknown --drop {drop!r} (choose from {', '.join(DROPS)})")
    set_max_decompressed(max_decompressed)
    res = whatif_paths(paths, DropSpec(drop, drop_at),
                       StallOptions(tolerance_ns=round(tolerance_us * 1000)), jobs=jobs)
    buf = io.StringIO()
    if fmt == "json":
        json.dump({"whatif": res.to_dict()}, buf, indent=1, allow_nan=False)
        buf.write("\n")
    else:
        render_table(res, buf)
    write_text(buf.getvalue(), output)
    if html is not None:  # the full stall report, with the what-if section in it
        from profplug.analyzers.report import analyze

        from .report import write_html

        rep = analyze(paths, StallOptions(tolerance_ns=round(tolerance_us * 1000)), jobs=jobs)
        write_html(rep, html, res)
    return 0


@app.command()
def whatif(
    paths: Annotated[list[Path], typer.Argument(help="Trace files or directories of one run "
                                                     "(all ranks).")],
    drop: Annotated[str, typer.Option(
        "--drop", help="Which syncs stop blocking: device-sync (device-wide) | all-sync "
                       "(every host-blocking sync).")] = "device-sync",
    drop_at: Annotated[str | None, typer.Option(
        "--drop-at", help="Only the syncs at this call site (as `profplug report` names "
                          "it).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the result here.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML page.")
                    ] = None,
    tolerance_us: Annotated[float, typer.Option(
        "--tolerance-us", help="Clock slack when matching a gap to a sync call.")] = 2.0,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Parallel parsers.")] = None,
    max_decompressed: Annotated[str | None, typer.Option(
        "--max-decompressed", help="Most bytes a .gz trace may inflate to (e.g. 8G; default "
                                   "2G, or $PROFPLUG_MAX_DECOMPRESSED).")] = None,
) -> None:
    """Predict each rank's step time with the synchronizes made non-blocking."""
    code = run_whatif(paths, drop, drop_at, fmt, output, html, tolerance_us, jobs,
                      max_decompressed)
    if code:
        raise typer.Exit(code)
