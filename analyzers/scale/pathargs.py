"""The paths a command is given: ``f1,f2`` (the files of one run) split in every command,
each checked to exist before anything is read."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from profplug.analyzers.core.errors import ProfplugError, TraceError

# What the Python API takes as "paths": one path (str or Path) or several.
PathsLike = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]

# Words users put after a flag that takes no value ("--strict true"): a path or a command
# (``profplug run``) spelled like this gets a hint, not "no such file" or a run of /bin/true.
FLAG_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})


def as_paths(paths: PathsLike) -> list[Path]:
    """One path or several, as a list: a str is one path, never a sequence of characters."""
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def split_paths(paths: PathsLike) -> list[Path]:
    """The paths, one that does not exist and holds commas split there (``f1,f2``: the
    files of one run, the same syntax in every command)."""
    out: list[Path] = []
    for p in as_paths(paths):
        s = str(p)
        out += [Path(x) for x in s.split(",") if x] if "," in s and not p.exists() else [p]
    return out


def check_paths(paths: PathsLike, error: type[ProfplugError] = TraceError) -> list[Path]:
    """The paths (:func:`split_paths`), each of which must exist (else ``error``, a
    TraceError as the readers raise by default); a missing ``true`` (``--strict true``) is
    told that flags take no value."""
    out = split_paths(paths)
    if not out or any(not str(p) for p in as_paths(paths)):  # ",", ",,", "" from the API
        given = ", ".join(repr(str(p)) for p in as_paths(paths)) or "none"
        raise error(f"no trace path given ({given}): name a run's folder or its trace files")
    for p in out:
        if not p.exists():
            hint = (f" (a flag takes no value: write e.g. --strict, not --strict {p})"
                    if str(p).lower() in FLAG_VALUES else "")
            raise error(f"{p}: no such file or directory{hint}")
    return out


def run_paths(run: str) -> list[Path]:
    """A run: a directory, a trace file, or trace files joined by commas."""
    return check_paths(run, ProfplugError)
