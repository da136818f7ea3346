"""The per-rank cache: a second read of unchanged traces parses nothing and gives the same
report; any change to the trace, the reader or the read options is a miss."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from profplug.analyzers.readers import cache
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale.load import load_ranks
from profplug.analyzers.stalls.rank import StallOptions
from reference import blank, report_json


def test_second_report_reads_the_cache_and_is_the_same(run4: list[Path], tmp_path: Path,
                                                       parses: list[str]) -> None:
    store = tmp_path / "cache"
    read = ReadOptions(cache_dir=str(store))
    run = report_analyses(None)
    first = analyze(run4, read=read, run=run, jobs=1, progress=False)
    assert parses == [f.name for f in run4]
    # per file its timelines (npz) and its ranks' stall analyses; the run-level results
    entries = sorted(p.name for p in store.iterdir()
                     if not p.name.startswith("run-") and p.name != cache.TAG_NAME)
    assert len(entries) == 8
    assert sum(n.startswith("rank") and n.endswith(".npz") for n in entries) == 4
    assert sum(n.startswith("ranks-") and n.endswith(".json") for n in entries) == 4
    assert sorted(p.name for p in run4[0].parent.iterdir()) == [f.name for f in run4]
    parses.clear()
    again = analyze(run4, read=read, run=run, jobs=1, progress=False)
    assert parses == []  # nothing parsed
    assert report_json(again) == report_json(first)


def test_a_changed_trace_misses(run4: list[Path], tmp_path: Path, parses: list[str]) -> None:
    read = ReadOptions(cache_dir=str(tmp_path / "cache"))
    load_ranks(run4, read=read, jobs=1, progress=False)
    parses.clear()
    # same size and mtime, one byte of the head changed: the content hash misses
    f = run4[1]
    st = f.stat()
    data = bytearray(f.read_bytes())
    data[data.index(b" ")] = ord("\n")  # whitespace in the head: the JSON means the same
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    # a newer mtime on another file, its bytes unchanged: the content is the key, a hit
    os.utime(run4[2], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    load_ranks(run4, read=read, jobs=1, progress=False)
    assert parses == [run4[1].name]


def test_a_reader_change_or_other_read_options_miss(run4: list[Path], tmp_path: Path,
                                                    parses: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    read = ReadOptions(cache_dir=str(tmp_path / "cache"))
    load_ranks(run4[:1], read=read, jobs=1, progress=False)
    parses.clear()
    load_ranks(run4[:1], read=read.with_step_range("re:Profiler.*"), jobs=1, progress=False)
    assert parses == ["rank0.json"]
    monkeypatch.setattr(cache, "reader_fingerprint", lambda: "a-new-reader")
    load_ranks(run4[:1], read=read, jobs=1, progress=False)
    assert parses == ["rank0.json", "rank0.json"]


def test_the_fingerprint_covers_the_reader_sources(tmp_path: Path) -> None:
    sources = cache.shaping_sources()
    root = Path(cache.__file__).resolve().parents[1]
    for part in ("readers/kineto/reader.py", "readers/nsys/reader.py", "core/timeline.py",
                 "steps/rule.py"):
        assert root / part in sources, part
    assert all(f.is_file() for f in sources)
    copies = []
    for f in sources:
        (tmp_path / f.parent.name).mkdir(exist_ok=True)
        copies.append(tmp_path / f.parent.name / f.name)
        copies[-1].write_bytes(f.read_bytes())
    assert cache.fingerprint(copies) == cache.reader_fingerprint()
    copies[0].write_bytes(copies[0].read_bytes() + b"# one more line\n")
    assert cache.fingerprint(copies) != cache.reader_fingerprint()


def test_a_damaged_entry_is_a_miss_and_is_rewritten(run4: list[Path], tmp_path: Path,
                                                    parses: list[str]) -> None:
    store = tmp_path / "cache"
    read = ReadOptions(cache_dir=str(store))
    want = load_ranks(run4[:1], read=read, stall=StallOptions(), jobs=1, progress=False)
    (entry,) = store.glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:100])  # torn (what the rename prevents)
    parses.clear()
    got = load_ranks(run4[:1], read=read, stall=StallOptions(), jobs=1, progress=False)
    assert parses == ["rank0.json"]
    assert got.stalls[0].gpu_time() == want.stalls[0].gpu_time()
    assert cache.load_entry(entry) is not None  # written whole again
    assert [p.name for p in store.glob("*.npz")] == [entry.name]
    assert not list(store.glob(".profplug-tmp-*"))  # no temporary file left


def test_the_environment_variable_turns_it_on(run4: list[Path], tmp_path: Path,
                                              parses: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFPLUG_CACHE", str(tmp_path / "envcache"))
    load_ranks(run4[:2], jobs=1, progress=False)
    load_ranks(run4[:2], jobs=1, progress=False)
    assert parses == ["rank0.json", "rank1.json"]
    assert len(list((tmp_path / "envcache").glob("*.npz"))) == 2


def test_a_cache_folder_that_cannot_be_written_only_costs_time(run4: list[Path],
                                                              tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    read = ReadOptions(cache_dir=str(blocker / "cache"))
    got = load_ranks(run4[:1], read=read, jobs=1, progress=False)
    assert [t.rank for t in got.timelines] == [0]


def test_an_entry_holds_every_rank_of_a_file_in_order(tmp_path: Path) -> None:
    from profplug.analyzers.core.timeline import Timeline

    tls = [Timeline(rank=r, source="nsys", files=["x"], names=[f"n{r}"]) for r in (3, 1, 2)]
    cache.save_entry(tmp_path / "e.npz", tls)
    back = cache.load_entry(tmp_path / "e.npz")
    assert back is not None and [(t.rank, t.names) for t in back] == [(3, ["n3"]), (1, ["n1"]),
                                                                       (2, ["n2"])]
    assert json.loads(json.dumps([t.files for t in back])) == [["x"]] * 3


def test_cli_cache_quiet_and_bad_dask_address(run4: list[Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from profplug.cli.main import main

    d, store = str(run4[0].parent), tmp_path / "c"
    for cmd in (["report", d, "-f", "json", "--no-whatif"], ["whatif", d, "-f", "json"],
                ["compare", d, d, "-f", "json", "--no-whatif"]):
        assert main([*cmd, "--cache", str(store), "-q"]) == 0
        first = capsys.readouterr()
        assert main([*cmd, "--cache", str(store), "--quiet"]) == 0
        again = capsys.readouterr()
        assert blank(again.out) == blank(first.out)
        assert "reading traces" not in first.err + again.err
    # one entry per trace, shared by the commands; the stall analyses of its ranks
    assert len(list(store.glob("*.npz"))) == 4 and len(list(store.glob("ranks-*.json"))) == 4
    assert main(["report", d, "--dask", "local:0"]) == 2
    assert capsys.readouterr().err.strip() == ("profplug: error: --dask local:0: local:N needs "
                                               "a number of workers >= 1")
    assert main(["whatif", d, "--dask", str(tmp_path / "nope.json")]) == 2
    assert "no such scheduler file (--dask takes a scheduler address (tcp://host:port), a " \
        "scheduler file or local[:N])" in (
        capsys.readouterr().err)


def test_the_cache_folder_is_made_absolute(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from profplug.analyzers.scale.load import settled

    monkeypatch.chdir(tmp_path)
    assert settled(ReadOptions(cache_dir="c")).cache_dir == str(tmp_path / "c")
    monkeypatch.setenv("PROFPLUG_CACHE", "e")
    assert settled(None).cache_dir == str(tmp_path / "e")
    assert settled(ReadOptions(cache_dir="/x")).cache_dir == "/x"  # the option wins


def test_a_cache_folder_that_cannot_be_written_is_said_once(tmp_path, capsys) -> None:
    # given --cache under a regular file (no folder can be made there)
    from profplug.analyzers.readers.base import ReadOptions
    from profplug.analyzers.scale.load import settled

    blocker = tmp_path / "file"
    blocker.write_text("x")
    opt = settled(ReadOptions(cache_dir=str(blocker / "cache")))
    # then one warning line, and the read goes on without the cache
    err = capsys.readouterr().err
    assert opt.cache_dir is None and err.count("\n") == 1
    assert "--cache" in err and "reading without the cache" in err
    # and a folder that can be written keeps it
    assert settled(ReadOptions(cache_dir=str(tmp_path / "ok"))).cache_dir == str(tmp_path / "ok")
