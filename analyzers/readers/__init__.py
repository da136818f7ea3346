"""Trace readers, one per format; each turns a file into one Timeline per rank."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...errors import TraceError
from ..timeline import Timeline

Reader = Callable[[Path, int], list[Timeline]]


def _kineto(path: Path, index: int) -> list[Timeline]:
    from .kineto import read_kineto

    return [read_kineto(path, index)]


def _nsys(path: Path, index: int) -> list[Timeline]:
    try:
        from .nsys import read_nsys
    except ImportError as exc:  # pragma: no cover - until the Nsight reader lands
        raise TraceError(f"{path}: Nsight Systems reports are not supported yet") from exc
    return read_nsys(path)


def reader_for(path: Path) -> Reader | None:
    """The reader for a file by its name, or None if it is not a trace profplug reads."""
    n = path.name.lower()
    if n.endswith((".json", ".json.gz")):
        return _kineto
    if n.endswith((".sqlite", ".sqlite.gz", ".nsys-rep", ".qdrep")):
        return _nsys
    return None
