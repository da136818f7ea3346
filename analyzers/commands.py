"""What ``profplug report``, ``compare`` and ``whatif`` do once their options are parsed.

Read, analyze, render through ``render.registry``, write to a file or stdout, and return the
exit code. The CLI modules (``profplug/cli``) and ``profplug run`` (``session/launch.py``)
call these; nothing here sees argv. Warnings for the user go to stderr, one line each.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import ProfplugError
from .compare import Comparison, compare
from .crossrank import cross_rank_analysis
from .load import load_timelines
from .readers.base import ReadOptions
from .render.registry import PAGE, check_format, render_text
from .report import Report, analyze, analyze_timelines, find_run_meta
from .stalls import StallOptions
from .whatif import DROP_ALL, DROP_DEVICE, DropSpec, WhatIfResult, whatif, whatif_analysis

DROPS = (DROP_DEVICE, DROP_ALL)


def write_text(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output``, or to stdout when ``output`` is None."""
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        raise ProfplugError(f"{output}: cannot write ({exc.strerror or exc})") from None


def write_page(result: object, path: Path) -> None:
    """The HTML page of a report or a comparison, and a line on stderr saying so."""
    write_text(render_text(result, PAGE), path)
    print(f"profplug: wrote {path}", file=sys.stderr)


def run_report(paths: Sequence[Path], *, fmt: str = "table", output: Path | None = None,
               html: Path | None = None, options: StallOptions | None = None,
               read: ReadOptions | None = None, jobs: int | None = None,
               whatif: bool = False, strict: bool = False, cross_rank: bool = True) -> int:
    """The stall report of the traces under ``paths``; returns the exit code.

    ``whatif``: also replay the run without its device-wide synchronizes (the ``whatif`` key
    of the JSON, a section of the table and of the HTML). ``cross_rank`` (default on; linear
    in the trace): bubbles, critical path and drain across ranks (the ``cross_rank`` key, and
    ``comm_transfer_us``/``comm_wait_us``/``bubble_us`` in each rank). ``strict``: 1 when a
    trace had warnings or skipped events, or ranks are missing.
    """
    check_format(Report, fmt)
    run = [cross_rank_analysis()] if cross_rank else []
    rep = analyze(paths, options, jobs=jobs, read=read,
                  run=[*run, whatif_analysis()] if whatif else run)
    write_text(render_text(rep, fmt), output)
    if html is not None:
        write_page(rep, html)
    problems = [f"rank {r.rank}: {w}" for r in rep.ranks for w in r.warnings]
    missing = rep.meta.get("missing_ranks")
    if missing:  # profplug run: ranks of the world that left no trace (SIGKILL, OOM...)
        print(f"profplug: warning: missing ranks: {missing} (run.json: no trace for them)",
              file=sys.stderr)
    if fmt != "table":  # the table shows them itself
        for p in problems:
            print(f"profplug: warning: {p}", file=sys.stderr)
    if strict and (problems or missing or any(r.skipped for r in rep.ranks)):
        print("profplug: --strict: the traces had warnings or skipped events", file=sys.stderr)
        return 1
    return 0


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
    """A run's default name: its directory's name, else its (first) file's stem."""
    p = Path(run.split(",")[0]) if not Path(run).exists() else Path(run)
    return p.name if p.is_dir() else p.name.split(".")[0]


def run_compare(run_a: str, run_b: str, *, fmt: str = "table", output: Path | None = None,
                html: Path | None = None, options: StallOptions | None = None,
                labels: tuple[str | None, str | None] = (None, None)) -> int:
    """Two runs (see :func:`run_paths`) side by side per rank; returns the exit code."""
    check_format(Comparison, fmt)
    opt = options or StallOptions()
    # the same analyses as `profplug report`, so each side is that run's report
    rep_a = analyze(run_paths(run_a), opt, run=[cross_rank_analysis()])
    rep_b = analyze(run_paths(run_b), opt, run=[cross_rank_analysis()])
    cmp = compare(rep_a, rep_b, labels[0] or run_label(run_a), labels[1] or run_label(run_b))
    write_text(render_text(cmp, fmt), output)
    if html is not None:
        write_page(cmp, html)
    return 0


def run_whatif(paths: Sequence[Path], *, drop: DropSpec | None = None, fmt: str = "table",
               output: Path | None = None, html: Path | None = None,
               options: StallOptions | None = None, jobs: int | None = None) -> int:
    """Replay the run under ``paths`` without the chosen syncs; returns the exit code.

    ``html``: the full stall report of the run, with the what-if section in it.
    """
    drop = drop or DropSpec()
    check_format(WhatIfResult, fmt)
    if drop.kinds not in DROPS:
        raise ProfplugError(f"unknown --drop {drop.kinds!r} (choose from {', '.join(DROPS)})")
    opt = options or StallOptions()
    timelines = load_timelines(list(paths), jobs=jobs)
    res = whatif(timelines, drop, opt)
    write_text(render_text(res, fmt), output)
    if html is not None:
        rep = analyze_timelines(timelines, opt)
        rep.meta = find_run_meta(list(paths))
        rep.add(res)
        write_page(rep, html)
    return 0
