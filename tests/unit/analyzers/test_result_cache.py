"""Run-level results in the per-rank cache (``resultcache``): a cached re-run serves the
what-if from the cache, the same JSON as the first run and as the uncached path; any change
to a trace, the analyzer's code, the options or the analysis' parameters is a miss; a result
that JSON would not carry exactly is never served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pipeline_synth import PipelineSpec, write
from profplug.analyzers import commands, resultcache
from profplug.analyzers.commands import report_analyses
from profplug.analyzers.load import load_ranks
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.report import analyze
from profplug.analyzers.stalls import StallOptions
from profplug.analyzers.steprule import DEFAULT_STEPS
from profplug.analyzers.whatif import DropSpec
from test_dispatch import report_json


@pytest.fixture
def run4(tmp_path: Path) -> list[Path]:
    files, _ = write(PipelineSpec(stages=4, steps=3), tmp_path / "traces")
    return files


@pytest.fixture
def whatifs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The what-ifs really run (their number of ranks), through the report's default one."""
    seen: list[int] = []
    real = commands.whatif_if_cheap

    def counting(timelines, options, drop=None, ranks=None):  # type: ignore[no-untyped-def]
        seen.append(len(timelines))
        return real(timelines, options, drop, ranks)

    monkeypatch.setattr(commands, "whatif_if_cheap", counting)
    return seen


def _report(files: list[Path], store: Path | None, **kw: object) -> object:
    read = ReadOptions(cache_dir=None if store is None else str(store))
    return analyze(files, read=read, run=report_analyses(None, **kw), jobs=1,  # type: ignore[arg-type]
                   progress=False, options=StallOptions())


def test_the_cached_rerun_serves_the_whatif_and_is_the_same(run4: list[Path], tmp_path: Path,
                                                            whatifs: list[int]) -> None:
    # given a first report through the cache, and the same report without it
    store = tmp_path / "cache"
    first = _report(run4, store)
    plain = _report(run4, None)
    assert whatifs == [4, 4]
    # when the report is made again through the cache
    again = _report(run4, store)
    # then the what-if is not run again, and the JSON is the first one's, wall times included
    assert whatifs == [4, 4]
    assert first.to_dict() == again.to_dict()  # type: ignore[attr-defined]
    assert "whatif" in again.to_dict() and "cross_rank" in again.to_dict()  # type: ignore[attr-defined]
    # and the uncached path's, bar the wall times
    assert report_json(again) == report_json(plain)
    assert len(list(store.glob("run-*.json"))) == 1  # the what-if's; the cross-rank below


def test_any_change_misses(run4: list[Path], tmp_path: Path, whatifs: list[int],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "cache"
    _report(run4, store)
    assert whatifs == [4]
    # another drop rule (the analysis' parameter) misses
    analyze(run4, read=ReadOptions(cache_dir=str(store)), jobs=1, progress=False,
            run=report_analyses(None, drop=DropSpec("all-sync")))
    assert whatifs == [4, 4]
    # other stall options miss
    analyze(run4, read=ReadOptions(cache_dir=str(store)), jobs=1, progress=False,
            run=report_analyses(None), options=StallOptions.from_tolerance_us(7.0))
    assert whatifs == [4, 4, 4]
    # a change to the analyzer's code misses
    real = resultcache.analyzer_fingerprint
    monkeypatch.setattr(resultcache, "analyzer_fingerprint", lambda: "a-new-analyzer")
    _report(run4, store)
    assert whatifs == [4, 4, 4, 4]
    monkeypatch.setattr(resultcache, "analyzer_fingerprint", real)
    # a changed trace misses (a newer mtime)
    st = run4[2].stat()
    os.utime(run4[2], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    _report(run4, store)
    assert whatifs == [4, 4, 4, 4, 4]
    # and a subset of the files is another run
    _report(run4[:2], store)
    assert whatifs == [4, 4, 4, 4, 4, 2]


def test_a_damaged_entry_is_a_miss_and_is_rewritten(run4: list[Path], tmp_path: Path,
                                                    whatifs: list[int]) -> None:
    store = tmp_path / "cache"
    first = _report(run4, store)
    (entry,) = store.glob("run-*.json")
    entry.write_bytes(entry.read_bytes()[:50])  # torn (what the rename prevents)
    again = _report(run4, store)
    assert whatifs == [4, 4]
    assert report_json(again) == report_json(first)
    # written whole again: the entry the report keys it by holds the what-if
    got = load_ranks(run4, read=ReadOptions(cache_dir=str(store)), jobs=1, progress=False,
                     keep_timelines=False)
    assert got.cache_keys is not None and len(got.cache_keys) == 4
    cache = resultcache.ResultCache(store, got.cache_keys, (StallOptions(), DEFAULT_STEPS))
    (cheap,) = [a for a in report_analyses(None) if getattr(a, "label", "") == "what-if"]
    assert cache.get(cheap).to_dict() == again.run["whatif"].to_dict()  # type: ignore[attr-defined]
    assert not list(store.glob(".tmp-*"))


def test_results_json_does_not_carry_exactly_are_not_kept(run4: list[Path],
                                                          tmp_path: Path) -> None:
    # the cross-rank result holds numpy arrays and whole-number floats: never cached
    store = tmp_path / "cache"
    _report(run4, store, cross_rank=True)
    tokens = {p.read_bytes().split(b"\n", 1)[0] for p in store.glob("run-*.json")}
    assert tokens == {b"whatif"}


def test_without_the_cache_nothing_is_kept(run4: list[Path], tmp_path: Path,
                                        whatifs: list[int]) -> None:
    _report(run4, None)
    _report(run4, None)
    assert whatifs == [4, 4]  # without --cache every report runs its analyses
    assert not list(tmp_path.rglob("run-*.json"))
