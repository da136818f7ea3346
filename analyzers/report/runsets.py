"""One run per report: traces of several ``profplug run`` runs are refused before they are read.

``profplug run`` writes one ``run.json`` beside each run's traces. The traces a command was
given belong to the run whose ``run.json`` ``report.run_meta`` would find for them. When
they belong to more than one, the ranks are not one pipeline: rank 0 of a device run and
rank 1 of an event run read as one run give a report and a prediction of a pipeline that
never ran (the ranks' clocks are seconds apart); a folder that holds a device and an event
run gives "rank 0 appears twice". Both are one line that names the runs and what to run
instead. Traces without a ``run.json`` (another tool's capture) are not grouped: their
run is whatever they were given as.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from profplug.analyzers.core.errors import TraceError, one_line
from profplug.analyzers.report.run_meta import run_json_paths


def run_of(trace: Path) -> Path | None:
    """The ``run.json`` of the run a trace file belongs to (its real path), if any."""
    for f in run_json_paths([trace]):
        if f.is_file():
            return Path(os.path.realpath(f))
    return None


def runs_of(files: list[Path]) -> dict[Path, list[Path]]:
    """The trace files grouped by their run's ``run.json`` (files without one left out)."""
    out: dict[Path, list[Path]] = {}
    for f in files:
        r = run_of(f)
        if r is not None:
            out.setdefault(r, []).append(f)
    return out


def check_one_run(inputs: list[Path], command: str = "report") -> None:
    """Raise a TraceError when the traces under ``inputs`` belong to several runs
    (see the module's docstring); ``command``: the one the hint names."""
    from profplug.analyzers.scale.load import trace_files

    try:
        files = trace_files(inputs)
    except TraceError:  # said by the read in its turn
        return
    runs = runs_of(files)
    if len(runs) < 2:
        return
    folders = sorted(r.parent for r in runs)
    for p in inputs:
        rp = Path(os.path.realpath(p))
        inside = [d for d in folders if rp == d or rp in d.parents]
        if p.is_dir() and len(inside) > 1:
            names = ", ".join(one_line(os.path.relpath(d, rp)) + "/" for d in inside)
            first = shlex.quote(str(p / os.path.relpath(inside[0], rp)))
            raise TraceError(f"{one_line(p)}: holds {len(inside)} runs ({names}), each with "
                             f"its run.json; give one of them (profplug {command} {first}), "
                             "or set two side by side with profplug compare A B")
    names = ", ".join(one_line(d) for d in folders)
    hint = ("profplug whatif A --against B sets A's prediction against B; "
            if command == "whatif" else "")
    raise TraceError(f"the traces come from {len(runs)} runs ({names}: one run.json each), "
                     f"not one pipeline: {hint}profplug compare A B sets two runs side by "
                     "side")
