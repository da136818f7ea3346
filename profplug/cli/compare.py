"""``profplug compare RUN_A RUN_B``: two runs side by side per rank (e.g. device vs event)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from profplug.errors import ProfplugError, one_line

from .main import app
from .output import write_text

FORMATS = ("table", "json")


def run_paths(run: str) -> list[Path]:
    """A run: a directory, a trace file, or trace files joined by commas."""
    p = Path(run)
    if p.exists() or "," not in run:
        if not p.exists():
            raise ProfplugError(f"{run}: no such file or directory")
        return [p]
    parts = [Path(x) for x in run.split(",") if x]
    for x in parts:
        if not x.exists():
            raise ProfplugError(f"{x}: no such file or directory")
    return parts


def run_label(run: str) -> str:
    p = Path(run.split(",")[0]) if not Path(run).exists() else Path(run)
    return p.name if p.is_dir() else p.name.split(".")[0]


def run_compare(run_a: str, run_b: str, fmt: str = "table", output: Path | None = None,
                html: Path | None = None, tolerance_us: float = 2.0,
                labels: tuple[str | None, str | None] = (None, None),
                max_decompressed: str | None = None) -> int:
    from profplug.analyzers.compare import compare
    from profplug.analyzers.readers.limits import set_max_decompressed
    from profplug.analyzers.render.compare_table import render_compare_table
    from profplug.analyzers.report import analyze
    from profplug.analyzers.stalls import StallOptions

    if fmt not in FORMATS:
        raise ProfplugError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    set_max_decompressed(max_decompressed)
    opt = StallOptions(tolerance_ns=round(tolerance_us * 1000))
    rep_a = analyze(run_paths(run_a), opt)
    rep_b = analyze(run_paths(run_b), opt)
    cmp = compare(rep_a, rep_b, labels[0] or run_label(run_a), labels[1] or run_label(run_b))
    buf = io.StringIO()
    if fmt == "json":
        json.dump(cmp.to_dict(), buf, indent=1, allow_nan=False)
        buf.write("\n")
    else:
        render_compare_table(cmp, buf)
    write_text(buf.getvalue(), output)
    if html is not None:
        from profplug.analyzers.render.html import render_html

        hbuf = io.StringIO()
        render_html(rep_a, hbuf, compare=cmp)
        write_text(hbuf.getvalue(), html)
        print(f"profplug: wrote {one_line(html)}", file=sys.stderr)
    return 0


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="Run A: directory, trace file, or f1,f2,...")],
    run_b: Annotated[str, typer.Argument(help="Run B: directory, trace file, or f1,f2,...")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the comparison here.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML report.")
                    ] = None,
    label_a: Annotated[str | None, typer.Option("--label-a", help="Name of run A.")] = None,
    label_b: Annotated[str | None, typer.Option("--label-b", help="Name of run B.")] = None,
    tolerance_us: Annotated[float, typer.Option(
        "--tolerance-us", help="Clock slack when matching a gap to a sync call.")] = 2.0,
    max_decompressed: Annotated[str | None, typer.Option(
        "--max-decompressed", help="Most bytes a .gz trace may inflate to (e.g. 8G; default "
                                   "2G, or $PROFPLUG_MAX_DECOMPRESSED).")] = None,
) -> None:
    """Two runs side by side per rank: step time, idle by cause, syncs, and deltas."""
    code = run_compare(run_a, run_b, fmt, output, html, tolerance_us, (label_a, label_b),
                       max_decompressed)
    if code:
        raise typer.Exit(code)
