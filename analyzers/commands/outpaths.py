"""Output paths that would destroy or pollute an input: refused before anything runs.

``report X -o X`` used to overwrite the trace, ``ab-report D --html D/ab.json`` the A/B's only
record, ``report RUN/kineto -o RUN/run.json`` the run.json read beside the traces, ``report
X.sqlite -o X.nsys-rep`` the capture, and ``report D -f json -o D/report.json`` left a
``.json`` the next ``report D`` read as a trace. An output is refused when it is a file the
command reads (:func:`read_files`: the inputs, the trace files under an input directory, the
run.json files looked for beside them, an Nsight file's twins: report, export, ``.sqlite.gz``,
the export's ``-wal``/``-shm``/``-journal``), compared by resolved path and, for files that
exist, by (device, inode), so a symbolic or hard link is caught too; or when it lies inside an
input directory under a name that directory's readers would pick up (a trace suffix, an
export's sidecar, ``run.json``, ``ab.json``). Two outputs may not be one file, nor both
stdout (``-``; ``-o`` left out is stdout too): one stream cannot hold two documents.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.readers.nsys.source import EXPORT_SUFFIXES, REPORT_SUFFIXES
from profplug.analyzers.readers.registry import SUFFIXES

READ_BACK_NAMES = ("run.json", "ab.json")  # read from a directory besides the traces
SQLITE_SIDECARS = tuple(f".sqlite{s}" for s in ("-wal", "-shm", "-journal"))
NSYS_FAMILY = (*REPORT_SUFFIXES, *EXPORT_SUFFIXES, *SQLITE_SIDECARS)  # one capture's files
STDOUT = "-"


def is_stdout(output: Path | None) -> bool:
    """``-o -``: write to stdout."""
    return output is not None and str(output) == STDOUT


def _inode(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _read_back(name: str) -> bool:
    low = name.lower()
    return low in READ_BACK_NAMES or any(low.endswith(s) for s in (*SUFFIXES, *SQLITE_SIDECARS))


def nsys_twins(f: Path) -> list[Path]:
    """The files of the Nsight capture ``f`` belongs to (``X.nsys-rep``, ``X.qdrep``,
    ``X.sqlite``, ``X.sqlite.gz`` and the export's sidecars), ``f`` included; [] when ``f``
    is not an Nsight file. The reader reads or writes each of them (``readers.nsys.source``)."""
    low = f.name.lower()
    for suf in sorted(NSYS_FAMILY, key=len, reverse=True):
        if low.endswith(suf):
            stem = f.name[: -len(suf)]
            return [f.with_name(stem + s) for s in NSYS_FAMILY]
    return []


def read_files(inputs: Iterable[Path]) -> list[tuple[Path, Path]]:
    """Every file a command reads for ``inputs`` (paths it was given, files or directories),
    each with the input it is read for: the inputs, the trace files under a directory, each
    Nsight file's twins, and the run.json files the report looks for
    (``report.run_meta.run_json_paths``)."""
    from profplug.analyzers.report.run_meta import run_json_paths
    from profplug.analyzers.scale.load import trace_files

    out: list[tuple[Path, Path]] = []
    for p in inputs:
        out.append((p, p))
        files = [p]
        if p.is_dir():
            try:
                files = trace_files([p], [])
            except ProfplugError:  # said by the reader in its turn; not a file to keep
                files = []
        for f in files:
            out += [(x, p) for x in (f, *nsys_twins(f))]
        out += [(x, p) for x in run_json_paths([p])]
    return out


def check_outputs(outputs: Iterable[Path | None], inputs: Iterable[Path]) -> None:
    """Raise a ProfplugError (one line) when an output would overwrite a file the command
    reads, be read back as an input, or land on another output (see the module's
    docstring). ``outputs``: None is an output not asked for; pass ``Path("-")`` for one
    that goes to stdout by default."""
    outs = [o for o in outputs if o is not None]
    _check_distinct(outs)
    outs = [o for o in outs if not is_stdout(o)]
    if not outs:
        return
    given = list(inputs)
    dirs = [(p, Path(os.path.realpath(p))) for p in given if p.is_dir()]
    reads = [(f, p, Path(os.path.realpath(f)), _inode(f)) for f, p in read_files(given)]
    for out in outs:
        real, node = Path(os.path.realpath(out)), _inode(out)
        for f, p, rf, fnode in reads:
            if real == rf or (node is not None and node == fnode):
                what = (f"is an input ({one_line(f)})" if f == p else
                        f"would overwrite {one_line(f)}, read with the input {one_line(p)}")
                raise ProfplugError(f"{one_line(out)}: {what}; choose another output path")
        for d, rd in dirs:
            if rd in real.parents and _read_back(real.name):
                raise ProfplugError(
                    f"{one_line(out)}: inside the input directory {one_line(d)}, where a "
                    f"later run would read it back as an input; write it elsewhere")


def _check_distinct(outs: list[Path]) -> None:
    """Two outputs that are one file or one stream: the second would replace or follow the
    first."""
    seen: list[tuple[Path, Path, tuple[int, int] | None]] = []
    for out in outs:
        if is_stdout(out):
            if any(is_stdout(o) for o, _, _ in seen):
                raise ProfplugError("two documents to stdout ('-'; -o left out is stdout "
                                    "too): give one of them a file")
            seen.append((out, out, None))
            continue
        real, node = Path(os.path.realpath(out)), _inode(out)
        for o, ro, onode in seen:
            if ro == real or (node is not None and node == onode):
                raise ProfplugError(f"{one_line(out)}: also the path of another output "
                                    f"({one_line(o)}); give each output its own file")
        seen.append((out, real, node))


def stdout_or(output: Path | None) -> Path:
    """``-o``: None is stdout (``-``), for ``check_outputs``."""
    return Path(STDOUT) if output is None else output


def check_cache(cache_dir: str | os.PathLike[str] | None, inputs: Iterable[Path]) -> None:
    """Refuse a ``--cache`` folder (or ``$PROFPLUG_CACHE``) that is an input, lies inside
    one or holds one, or holds trace files of its own: the cache tags its folder as a cache
    (``CACHEDIR.TAG``), which a listing then skips, so ``report D --cache D`` would leave D
    unreadable as traces. Said before anything is written."""
    folder = cache_dir if cache_dir is not None else os.environ.get("PROFPLUG_CACHE") or None
    if folder is None:
        return
    from profplug.analyzers.readers.cache import is_cache_dir
    from profplug.analyzers.scale.load import trace_files

    real = Path(os.path.realpath(folder))
    for p in inputs:
        rp = Path(os.path.realpath(p))
        if real == rp or rp in real.parents or real in rp.parents:
            where = "is" if real == rp else "lies inside" if rp in real.parents else "holds"
            raise ProfplugError(f"--cache {one_line(folder)}: {where} the input "
                                f"{one_line(p)}; keep the cache in a folder of its own")
    if real.is_dir() and not is_cache_dir(real):
        try:
            held = trace_files([real])
        except ProfplugError:  # no trace there (the usual empty or new folder)
            return
        raise ProfplugError(f"--cache {one_line(folder)}: holds trace files "
                            f"({one_line(held[0])}); keep the cache in a folder of its own")
