"""The shipped sample runs (``sample_traces/``), each read and analyzed once per test session.

Reading and analyzing is the same code the CLI runs; only its results are kept and shared by
the tests that look at the samples (goldens, findings, headlines, the HTML page, cross-rank,
what-if). A kept timeline's arrays are made read-only, so an analysis that wrote into its
input would fail loudly instead of changing what the next test sees.

- ``timelines(run)``: the timelines of a sample run (a path under sample_traces/, relative
  to it or to the repository, or absolute);
- ``report(run)``: its default report, as ``profplug report`` makes it (the what-if when
  cheap, then the cross-rank analysis);
- ``stalls(run)``: its per-rank report alone (no run-level analysis, as ``analyze(run)``);
- ``whatif(run, drop)``: its what-if; ``cross_rank(run)``: its cross-rank analysis;
- ``reading_once(monkeypatch)``: the CLI's own reading of sample traces goes through the
  cache for the rest of a test (``main(["report", run, ...])`` reads each run once); a test
  module asks for it with the ``samples_read_once`` mark (tests/conftest.py);
- ``sample_run_dirs()``: every sample run's directory; ``sample_device_event_pairs()``: the
  (device run, event run) pairs among them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import profplug.analyzers.commands.whatif
import pytest
from profplug.analyzers.compare import against_run
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank import CrossRankResult
from profplug.analyzers.crossrank import cross_rank as run_cross_rank
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.readers.registry import SUFFIXES
from profplug.analyzers.report import analysis
from profplug.analyzers.report.analysis import Report, analyze_timelines
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.scale import load
from profplug.analyzers.scale.load import SKIP_NAMES, LoadedRanks
from profplug.analyzers.scale.pathargs import as_paths
from profplug.analyzers.stalls.rank import RankResult, StallOptions, analyze_rank
from profplug.analyzers.whatif import DropSpec, WhatIfResult
from profplug.analyzers.whatif import whatif as run_whatif

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
_READ = load.load_timelines  # the real reader, whatever a test patches


def sample_run_dirs() -> list[Path]:
    """Directories under sample_traces/ that hold traces (each is one run)."""
    if not SAMPLES.is_dir():
        return []
    out = []
    for d in sorted(p for p in SAMPLES.rglob("*") if p.is_dir()):
        if any(f.is_file() and f.name.endswith(SUFFIXES) and f.name not in SKIP_NAMES
               for f in d.iterdir()):
            out.append(d)
    return out


def sample_device_event_pairs() -> list[tuple[Path, Path]]:
    """(device run, event run) pairs: sibling sample dirs named *device* and *event*."""
    runs = sample_run_dirs()
    pairs = []
    for dv in runs:
        if "device" in dv.name:
            ev = dv.with_name(dv.name.replace("device", "event"))
            if ev in runs:
                pairs.append((dv, ev))
    return pairs


def _frozen(tl: Timeline) -> Timeline:
    for v in vars(tl).values():
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return tl


def _key(paths: Any) -> tuple[str, ...] | None:
    """The paths as given (their spelling is in the outputs), or None when any is outside
    sample_traces/ (those are read as usual, every time)."""
    out = []
    for p in as_paths(paths):
        full = (p if p.is_absolute() else Path.cwd() / p).resolve()
        if not full.is_relative_to(SAMPLES):
            return None
        out.append(str(p))
    return tuple(out)


@functools.cache
def _read(cwd: str, key: tuple[str, ...], read: ReadOptions | None) -> tuple[Timeline, ...]:
    assert os.getcwd() == cwd
    return tuple(_frozen(t) for t in _READ(list(key), jobs=1, progress=False, read=read))


def _path(run: str | os.PathLike[str]) -> str:
    p = Path(run)
    if not p.is_absolute():
        p = SAMPLES / p if not p.parts or p.parts[0] != "sample_traces" else ROOT / p
    return str(p)


def timelines(run: str | os.PathLike[str], read: ReadOptions | None = None
              ) -> list[Timeline]:
    """The sample run's timelines, read once per session."""
    p = _path(run)
    key = _key(p)
    assert key is not None, f"{run}: not a sample run"
    return list(_read(os.getcwd(), key, read))


@functools.cache
def report(run: str | os.PathLike[str]) -> Report:
    """The default report of a sample run (``profplug report RUN``)."""
    rep = analyze_timelines(timelines(run), None, report_analyses(None))
    rep.meta = find_run_meta(_path(run))
    return rep


@functools.cache
def stalls(run: str | os.PathLike[str]) -> Report:
    """The per-rank report of a sample run, no run-level analysis (``analyze(RUN)``)."""
    rep = analyze_timelines(timelines(run))
    rep.meta = find_run_meta(_path(run))
    return rep


@functools.cache
def cross_rank(run: str | os.PathLike[str]) -> CrossRankResult:
    """The cross-rank analysis of a sample run (``cross_rank(load_timelines(RUN))``)."""
    return run_cross_rank(timelines(run))


@functools.cache
def whatif(run: str | os.PathLike[str], drop: DropSpec | None = None) -> WhatIfResult:
    """The what-if of a sample run (``profplug whatif RUN``)."""
    return run_whatif(timelines(run), drop or DropSpec())


def _cached_load(*args: Any, **kw: Any) -> list[Timeline]:
    paths = args[0] if args else kw.pop("paths")
    key = _key(paths)
    if key is None or kw.get("progress"):
        return _READ(paths, *args[1:], **kw)
    return list(_read(os.getcwd(), key, kw.get("read")))


_LOAD_RANKS = load.load_ranks  # likewise


@functools.cache
def _stalls(cwd: str, key: tuple[str, ...], read: ReadOptions | None,
            tolerance_ns: int) -> tuple[RankResult, ...]:
    opt = StallOptions(tolerance_ns=tolerance_ns)
    return tuple(analyze_rank(t, opt) for t in _read(cwd, key, read))


def _cached_load_ranks(paths: Any, **kw: Any) -> LoadedRanks:
    """``load.load_ranks`` (what ``analyze`` reads with) through the cache."""
    key = _key(paths)
    if key is None or kw.get("progress"):
        return _LOAD_RANKS(paths, **kw)
    read, stall = kw.get("read"), kw.get("stall")
    tls = list(_read(os.getcwd(), key, read))
    stalls = (list(_stalls(os.getcwd(), key, read, stall.tolerance_ns))
              if stall is not None else [])
    parts = {name: [part(tl) for tl in tls] for name, part, _ in kw.get("parts", ())}
    return LoadedRanks(stalls, tls if kw.get("keep_timelines", True) else [], [], parts=parts)


LOADERS: list[tuple[Any, str, Any]] = [(analysis, "load_ranks", _cached_load_ranks),
                                       (analysis, "load_timelines", _cached_load),
                                       (against_run, "load_timelines", _cached_load),
                                       (profplug.analyzers.commands.whatif, "load_timelines", _cached_load)]


def reading_once(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[Timeline]]:
    """For the rest of the test, the CLI reads sample runs through the cache."""
    for mod, name, cached in LOADERS:
        monkeypatch.setattr(mod, name, cached)
    return _cached_load
