"""Output paths that would destroy or pollute an input: refused before anything runs.

``report X -o X`` used to overwrite the trace, ``ab-report D --html D/ab.json`` the A/B's only
record, and ``report D -f json -o D/report.json`` left a ``.json`` the next ``report D`` read
as a trace. An output is refused when it is one of the inputs (the same file, through a link
too), or when it lies inside an input directory under a name that directory's readers would
pick up (a trace suffix, ``run.json``, ``ab.json``). ``-`` is stdout.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import ProfplugError, one_line
from .readers.registry import SUFFIXES

READ_BACK_NAMES = ("run.json", "ab.json")  # read from a directory besides the traces
STDOUT = "-"


def is_stdout(output: Path | None) -> bool:
    """``-o -``: write to stdout."""
    return output is not None and str(output) == STDOUT


def _same_file(a: Path, b: Path) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _read_back(name: str) -> bool:
    low = name.lower()
    return low in READ_BACK_NAMES or any(low.endswith(s) for s in SUFFIXES)


def check_outputs(outputs: Iterable[Path | None], inputs: Iterable[Path]) -> None:
    """Raise a ProfplugError (one line) when an output would overwrite an input or be read
    back as one (see the module's docstring)."""
    ins = [(p, Path(os.path.realpath(p))) for p in inputs]
    for out in outputs:
        if out is None or is_stdout(out):
            continue
        real = Path(os.path.realpath(out))
        for given, rin in ins:
            if real == rin or _same_file(out, given):
                raise ProfplugError(f"{one_line(out)}: is an input ({one_line(given)}); "
                                    "choose another output path")
            if rin.is_dir() and rin in real.parents and _read_back(real.name):
                raise ProfplugError(
                    f"{one_line(out)}: inside the input directory {one_line(given)}, where a "
                    f"later run would read it back as an input; write it elsewhere")
