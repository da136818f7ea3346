"""Where a command writes (a file or stdout; the HTML page; the merged trace) and where it
reads the ranks (the local pool of processes, or ``--dask ADDRESS``)."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, TextIO

from profplug.analyzers.commands.outpaths import is_stdout
from profplug.analyzers.core.atomicfile import write_atomic, write_output
from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.render.chrometrace.export import TraceAsk, render_trace
from profplug.analyzers.render.registry import PAGE, render_text
from profplug.analyzers.report.analysis import Report
from profplug.analyzers.scale.dispatch import Backend, LocalBackend


def write_text(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output``, or to stdout when ``output`` is None or ``-``."""
    if output is None or is_stdout(output):
        sys.stdout.write(text)
        return
    write_output(output, text)  # whole or not at all: the old file stays on a failure


FORMAT_OF_SUFFIX = MappingProxyType({".json": "json", ".csv": "csv"})  # -o FILE's extension, when -f is not given


def output_format(fmt: str | None, output: Path | None) -> str:
    """``--format``, else the format ``-o FILE``'s extension names (``.json``, ``.csv``),
    else the table; ``-o page.html`` is refused (the page is ``--html``)."""
    if fmt is not None:
        return fmt
    if output is None or is_stdout(output):
        return "table"
    suffix = output.suffix.lower()
    if suffix in (".html", ".htm"):
        raise ProfplugError(f"-o {one_line(output)}: the HTML page is written by --html "
                            f"{one_line(output)}; -o takes the table, JSON or CSV")
    return FORMAT_OF_SUFFIX.get(suffix, "table")


def write_page(result: object, path: Path) -> None:
    """The HTML page of a report or a comparison, and a line on stderr saying so."""
    write_text(render_text(result, PAGE), path)
    print(f"profplug: wrote {one_line(path)}", file=sys.stderr)


def open_backend(jobs: int | None = None, dask: str | None = None) -> Backend:
    """The backend of a command: ``--dask ADDRESS`` (``dask_backend``, imported only then), else
    the local pool of ``jobs`` processes. Close it when done."""
    if jobs is not None and jobs < 1:
        raise ProfplugError(f"--jobs {jobs}: give 1 or more parallel parsers (left out: one "
                            "per usable CPU)")
    if dask is None:
        return LocalBackend(jobs)
    from profplug.analyzers.scale.dask_backend import DaskBackend

    return DaskBackend(dask)


def progress_flag(quiet: bool) -> bool | None:
    """The progress line: off with ``--quiet``, else when stderr is a terminal."""
    return False if quiet else None


def _text_into(fh: BinaryIO, gz: bool) -> tuple[io.TextIOWrapper, BinaryIO | None]:
    """A text stream into the binary file ``fh`` and, with ``gz``, the gzip stream between
    them: level 1 (the merged trace is hundreds of MB; most of the gain is in level 1), by
    ISA-L when ``isal`` is installed (``profplug[fast-gzip]``: ~5x less CPU than zlib, the
    same format), else by the standard library."""
    if not gz:
        return io.TextIOWrapper(fh, encoding="utf-8", newline="\n"), None
    try:
        from isal import igzip as gzmod
    except ImportError:
        gzmod = gzip
    packed: BinaryIO = gzmod.open(fh, "wb", compresslevel=1)
    return io.TextIOWrapper(packed, encoding="utf-8", newline="\n"), packed


def write_streamed(path: Path, render: Callable[[TextIO], object]) -> None:
    """``render(stream)`` into ``path`` (gzip-compressed when its name ends in ``.gz``),
    written whole or not at all (``core.atomicfile.write_atomic``)."""
    def write(fh: BinaryIO) -> None:
        text, packed = _text_into(fh, path.name.lower().endswith(".gz"))
        render(text)
        text.flush()
        text.detach()  # the file itself is closed by write_atomic
        if packed is not None:
            packed.close()  # the gzip trailer; a stream opened on fh leaves fh open

    write_atomic(path, write, into_special=True)


def check_trace_out(path: Path | None) -> Path | None:
    """``--trace-out``: a file, never stdout (``-``); for ``check_outputs``."""
    if path is not None and is_stdout(path):
        raise ProfplugError("--trace-out takes a file name (FILE.json or FILE.json.gz), not -")
    return path


def write_trace(runs: list[tuple[str, Report]], path: Path, ask: TraceAsk) -> None:
    """The merged, annotated trace of ``runs`` (``--trace-out``), and a line on stderr."""
    try:
        write_streamed(path, lambda fh: render_trace(runs, fh, ask))
    except OSError as exc:
        kept = " (the file there is unchanged)" if path.exists() else ""
        raise ProfplugError(f"{one_line(path)}: cannot write ({exc.strerror or exc}){kept}"
                            ) from None
    print(f"profplug: wrote {one_line(path)} (open it in https://ui.perfetto.dev or "
          "chrome://tracing)", file=sys.stderr)
