"""Every trace reader, once: its name, the file name endings it reads, how to call it.

Adding a format: a module with its read function (path in, one Timeline per rank out), a
small :class:`~.base.Reader` class here, and one line in ``READERS``. ``load`` takes the
file name endings (and its error messages) from here.
"""

from __future__ import annotations

from pathlib import Path

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.base import Reader, ReadOptions
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.readers.nsys.reader import read_nsys
from profplug.analyzers.readers.nsys.source import EXPORT_SUFFIXES, REPORT_SUFFIXES


class KinetoReader:
    """torch.profiler Chrome traces: one file per rank."""

    name: str = "kineto"
    suffixes: tuple[str, ...] = (".json", ".json.gz")

    def read(self, path: Path, index: int, options: ReadOptions) -> list[Timeline]:
        return [read_kineto(path, index, options.steps, options.max_decompressed)]


class NsysReader:
    """Nsight Systems exports and reports: one file holds every rank."""

    name: str = "nsys"
    suffixes: tuple[str, ...] = (*EXPORT_SUFFIXES, *REPORT_SUFFIXES)

    def read(self, path: Path, index: int, options: ReadOptions) -> list[Timeline]:
        return read_nsys(path, options.nsys, steps=options.steps,
                         max_bytes=options.max_decompressed)


READERS: tuple[Reader, ...] = (KinetoReader(), NsysReader())
SUFFIXES: tuple[str, ...] = tuple(s for r in READERS for s in r.suffixes)


def reader_for(path: Path) -> Reader | None:
    """The reader for a file by its name, or None if it is not a trace profplug reads."""
    n = path.name.lower()
    for r in READERS:
        if n.endswith(r.suffixes):
            return r
    return None
