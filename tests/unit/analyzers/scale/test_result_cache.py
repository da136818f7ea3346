"""Run-level results in the per-rank cache (``scale.result_cache``): a cached re-run serves the
what-if from the cache, the same JSON as the first run and as the uncached path; any change
to a trace, the analyzer's code, the options or the analysis' parameters is a miss; a result
that JSON would not carry exactly is never served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from profplug.analyzers.readers import cache
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale import dispatch, result_cache
from profplug.analyzers.scale.load import load_ranks
from profplug.analyzers.stalls.rank import StallOptions
from profplug.analyzers.steps.rule import DEFAULT_STEPS
from profplug.analyzers.whatif import DropSpec, analysis
from reference import report_json


@pytest.fixture
def whatifs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The what-ifs really run (their number of ranks), through the report's default one."""
    seen: list[int] = []
    real = analysis.whatif_if_cheap

    def counting(timelines, options, drop, max_events, ranks=None, keep_predicted=False,
                 memo=None):
        seen.append(len(timelines))
        return real(timelines, options, drop, max_events, ranks, keep_predicted, memo)

    monkeypatch.setattr(analysis, "whatif_if_cheap", counting)
    return seen


def _report(files: list[Path], store: Path | None, **kw: object) -> object:
    read = ReadOptions(cache_dir=None if store is None else str(store))
    return analyze(files, read=read, run=report_analyses(None, **kw), jobs=1,
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
    assert first.to_dict() == again.to_dict()
    assert "whatif" in again.to_dict() and "cross_rank" in again.to_dict()
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
    real = result_cache.analyzer_fingerprint
    monkeypatch.setattr(result_cache, "analyzer_fingerprint", lambda: "a-new-analyzer")
    _report(run4, store)
    assert whatifs == [4, 4, 4, 4]
    monkeypatch.setattr(result_cache, "analyzer_fingerprint", real)
    # a changed trace misses (one byte of whitespace more, the times kept)
    st = run4[2].stat()
    run4[2].write_bytes(run4[2].read_bytes() + b" ")
    os.utime(run4[2], ns=(st.st_atime_ns, st.st_mtime_ns))
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
    cache = result_cache.ResultCache(store, got.cache_keys, (StallOptions(), DEFAULT_STEPS))
    (cheap,) = [a for a in report_analyses(None) if a.label == "what-if"]
    assert cache.get(cheap).to_dict() == again.run["whatif"].to_dict()
    assert not list(store.glob(".profplug-tmp-*"))


def test_results_json_does_not_carry_exactly_are_not_kept(run4: list[Path],
                                                          tmp_path: Path) -> None:
    # the cross-rank result holds numpy arrays and whole-number floats: never cached
    store = tmp_path / "cache"
    _report(run4, store, cross_rank=True)
    tokens = {p.read_bytes().split(b"\n", 1)[0].split(b" ")[1]
              for p in store.glob("run-*.json")}
    assert tokens == {b"whatif"}


def test_without_the_cache_nothing_is_kept(run4: list[Path], tmp_path: Path,
                                        whatifs: list[int]) -> None:
    _report(run4, None)
    _report(run4, None)
    assert whatifs == [4, 4]  # without --cache every report runs its analyses
    assert not list(tmp_path.rglob("run-*.json"))


@pytest.fixture
def analyses(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times the ranks' stall analysis ran, and timelines were loaded from entries
    (in this process: jobs=1)."""
    seen = {"analyzed": 0, "loaded": 0}
    real_analyze, real_load = dispatch.analyze_ranks, cache.load_entry

    def analyze_counting(tls, options):
        seen["analyzed"] += len(tls)
        return real_analyze(tls, options)

    def load_counting(entry, *source):
        seen["loaded"] += 1
        return real_load(entry, *source)

    monkeypatch.setattr(dispatch, "analyze_ranks", analyze_counting)
    monkeypatch.setattr(cache, "load_entry", load_counting)
    return seen


def _per_rank(files: list[Path], store: Path | None) -> object:
    """The per-rank report: no what-if, no cross-rank analysis."""
    read = ReadOptions(cache_dir=None if store is None else str(store))
    return analyze(files, read=read, run=report_analyses(False, cross_rank=False), jobs=1,
                   progress=False)


def test_the_per_rank_report_reads_nothing_but_the_kept_analyses(
        run4: list[Path], tmp_path: Path, analyses: dict[str, int]) -> None:
    # given a per-rank report (no run-level analysis) made once through the cache
    store = tmp_path / "cache"
    first = _per_rank(run4, store)
    assert analyses == {"analyzed": 4, "loaded": 4}  # misses: the entries were loaded first
    # when it is made again
    again = _per_rank(run4, store)
    # then no timeline is loaded and no rank analyzed, and the report is the same, with its
    # gaps (the page's timeline), as without the cache
    assert analyses == {"analyzed": 4, "loaded": 4}
    plain = _per_rank(run4, None)
    assert report_json(again) == report_json(first) == report_json(plain)
    for a, b in zip(again.ranks, plain.ranks, strict=True):
        assert a.gaps.start_ns.dtype == b.gaps.start_ns.dtype
        assert (a.gaps.cause == b.gaps.cause).all() and (a.call_row == b.call_row).all()


def test_the_kept_analyses_miss_on_any_change(run4: list[Path], tmp_path: Path,
                                              analyses: dict[str, int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "cache"
    _report(run4[:1], store)
    _report(run4[:1], store)  # the default report: timelines loaded, the analysis kept
    assert analyses == {"analyzed": 1, "loaded": 2}
    analyze(run4[:1], read=ReadOptions(cache_dir=str(store)), jobs=1, progress=False,
            options=StallOptions.from_tolerance_us(7.0))
    assert analyses["analyzed"] == 2  # other stall options
    monkeypatch.setattr(result_cache, "analyzer_fingerprint", lambda: "a-new-analyzer")
    _report(run4[:1], store)
    assert analyses["analyzed"] == 3  # another analyzer
    (kept,) = [p for p in store.glob("ranks-*.json")
               if result_cache.load_stalls(p) is not None and p.stat().st_mtime_ns ==
               max(q.stat().st_mtime_ns for q in store.glob("ranks-*.json"))]
    kept.write_bytes(kept.read_bytes()[:40])  # damaged: a miss
    _report(run4[:1], store)
    assert analyses["analyzed"] == 4
