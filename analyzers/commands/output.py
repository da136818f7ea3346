"""Where a command writes (a file or stdout; the HTML page) and where it reads the ranks
(the local pool of processes, or ``--dask ADDRESS``)."""

from __future__ import annotations

import sys
from pathlib import Path

from profplug.analyzers.commands.outpaths import is_stdout
from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.render.registry import PAGE, render_text
from profplug.analyzers.scale.dispatch import Backend, LocalBackend


def write_text(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output``, or to stdout when ``output`` is None or ``-``."""
    if output is None or is_stdout(output):
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        raise ProfplugError(f"{output}: cannot write ({exc.strerror or exc})") from None


def write_page(result: object, path: Path) -> None:
    """The HTML page of a report or a comparison, and a line on stderr saying so."""
    write_text(render_text(result, PAGE), path)
    print(f"profplug: wrote {one_line(path)}", file=sys.stderr)


def open_backend(jobs: int | None = None, dask: str | None = None) -> Backend:
    """The backend of a command: ``--dask ADDRESS`` (``dask_backend``, imported only then), else
    the local pool of ``jobs`` processes. Close it when done."""
    if dask is None:
        return LocalBackend(jobs)
    from profplug.analyzers.scale.dask_backend import DaskBackend

    return DaskBackend(dask)


def progress_flag(quiet: bool) -> bool | None:
    """The progress line: off with ``--quiet``, else when stderr is a terminal."""
    return False if quiet else None
