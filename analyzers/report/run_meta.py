"""The ``run.json`` that ``profplug run`` writes beside the traces: where it is looked for and
how it is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profplug.analyzers.scale.pathargs import PathsLike, as_paths
from profplug.analyzers.steps import observer

MAX_META_DEPTH = 32  # run.json nests 3 deep; deeper: ignored, as unreadable
RUN_SUBDIRS = ("kineto", "nsys")  # where ``profplug run`` puts traces, beside run.json


def find_run_meta(paths: PathsLike) -> dict[str, Any]:
    """The ``run.json`` that ``profplug run`` wrote for these traces, if any.

    Only where ``profplug run`` puts it: in the directory given, beside the trace file, or
    one level up when the traces are in its ``kineto/`` or ``nsys/`` folder. A run.json
    further up belongs to something else (it would add foreign metadata and missing ranks).
    An unreadable one (bad JSON, nested too deep) is ignored; a number out of range
    (:func:`observer.drop_bad_numbers`) is ignored alone, said by ``meta_warnings``.
    """
    import json

    from profplug.analyzers.core.jsondepth import deeper_than

    for f in run_json_paths(paths):
        if f.is_file():
            try:
                meta = json.loads(f.read_text())
            except (OSError, ValueError, RecursionError):
                return {}
            if deeper_than(meta, MAX_META_DEPTH):  # the page's tables would recurse
                return {}
            if not isinstance(meta, dict):
                return {}
            bad = observer.drop_bad_numbers(meta)  # it would overflow, or print 10^400 us
            if bad:
                meta[observer.IGNORED_KEY] = bad
            return meta
    return {}


def run_json_paths(paths: PathsLike) -> list[Path]:
    """Where :func:`find_run_meta` looks for run.json, in its order (an output written over
    one of them would destroy an input: ``outpaths``)."""
    out: list[Path] = []
    for p in as_paths(paths):
        d = p if p.is_dir() else p.parent
        out += [c / "run.json" for c in ((d, d.parent) if d.name in RUN_SUBDIRS else (d,))]
    return out
