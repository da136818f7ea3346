"""The cache serves only what it can validate (issue 40, items 5, 6, 7, 14, 16, 20): an
entry is keyed on every file the reader reads (an Nsight export's WAL included) and on the
trace's whole content when affordable, names its source, is opened only when it is a
regular file, and holds arrays that make a Timeline; anything else is a miss."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core.analysis_spec import AnalysisSpec
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers import cache, registry
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale import result_cache
from profplug.analyzers.scale.load import load_ranks, trace_files
from profplug.analyzers.stalls.rank import StallOptions
from reference import report_json
from synth import NsysExport
from synth.pipeline import PipelineSpec, write


@pytest.fixture
def unblocked() -> Iterator[list[Path]]:
    """FIFOs to watch: from 5 s on, any reader blocked on one is let go (a writer opens
    and closes it: the reader sees an empty file) and the test is marked as having
    blocked (``blocked`` holds their names), so that it fails instead of hanging."""
    fifos: list[Path] = []
    blocked: list[str] = []
    done = threading.Event()

    def watch() -> None:
        done.wait(5)
        while not done.is_set():
            for f in fifos:
                try:
                    os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))  # only with a reader
                    blocked.append(f.name)
                except OSError:
                    pass
            done.wait(0.2)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    fifos.append(Path("/nonexistent"))
    yield fifos
    done.set()
    t.join()
    assert not blocked, f"blocked on {blocked}"


def _load(files: list[Path], store: Path) -> list:
    return load_ranks(files, read=ReadOptions(cache_dir=str(store)), jobs=1,
                      progress=False).timelines


# ---------------------------------------------------------------- 5: the WAL in the key
def _hot_insert_kernel(db: Path, shift_ns: int) -> None:
    """Copy the first kernel ``shift_ns`` later, in the WAL only (the writer dies before
    any checkpoint: a hot WAL, the main file untouched)."""
    code = (
        "import sqlite3, os, sys\n"
        "c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL')\n"
        "c.execute('PRAGMA wal_autocheckpoint=0')\n"
        "t = 'CUPTI_ACTIVITY_KIND_KERNEL'\n"
        "cols = [r[1] for r in c.execute(f'PRAGMA table_info({t})')]\n"
        "sel = ', '.join(f'{x} + {sys.argv[2]}' if x in ('start', 'end') else x for x in cols)\n"
        "c.execute(f'INSERT INTO {t} SELECT {sel} FROM {t} LIMIT 1'); c.commit()\n"
        "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(db), str(shift_ns)], check=True)


def _export(path: Path) -> Path:
    ex = NsysExport()
    p = ex.process()
    for k in range(3):
        p.launch(100.0 * k, 100.0 * k + 2, 50.0)
    return ex.write(path)


def test_an_export_whose_wal_gains_rows_misses(tmp_path: Path, parses: list[str]) -> None:
    (tmp_path / "t").mkdir()
    db = _export(tmp_path / "t" / "rank0.sqlite")
    store = tmp_path / "cache"
    _hot_insert_kernel(db, 10_000_000)
    main = db.stat()
    (first,) = _load([db], store)
    assert first.n_gpu == 4 and parses == ["rank0.sqlite"]
    _hot_insert_kernel(db, 20_000_000)  # the WAL gains a kernel; the main file is as it was
    assert (db.stat().st_size, db.stat().st_mtime_ns) == (main.st_size, main.st_mtime_ns)
    (again,) = _load([db], store)
    assert again.n_gpu == 5 and parses == ["rank0.sqlite"] * 2
    (hit,) = _load([db], store)  # unchanged since: a hit
    assert hit.n_gpu == 5 and len(parses) == 2


def test_an_export_keys_its_report_twin_and_a_report_its_export(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    assert [p.name for p in cache.companions(db)] == [
        "x.sqlite-wal", "x.sqlite-journal", "x.nsys-rep", "x.qdrep"]
    assert [p.name for p in cache.companions(tmp_path / "x.nsys-rep")] == [
        "x.sqlite", "x.sqlite-wal", "x.sqlite-journal"]
    _export(db)
    reader = registry.reader_for(db)
    assert reader is not None
    before = cache.cache_key(db, 0, reader, ReadOptions())
    (tmp_path / "x.nsys-rep").write_bytes(b"a report")
    assert cache.cache_key(db, 0, reader, ReadOptions()) != before


# ---------------------------------------------------------------- 6: the whole content
def _edit_middle_keep_times(f: Path) -> None:
    st = f.stat()
    data = bytearray(f.read_bytes())
    mid = len(data) // 2
    i = data.index(b'"dur": ', data.index(b'"cat": "kernel"', mid)) + len(b'"dur": ')
    data[i] = ord("9") if data[i] != ord("9") else ord("8")  # one digit of a kernel's
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # as cp -p / rsync -t keep them
    assert f.stat().st_size == st.st_size


def test_a_mid_file_edit_keeping_size_and_mtime_misses(tmp_path: Path,
                                                       parses: list[str]) -> None:
    files, _ = write(PipelineSpec(stages=1, steps=1000), tmp_path / "big")
    (f,) = files
    assert f.stat().st_size > 3 * cache.SAMPLE_BYTES  # the middle is outside the edges
    store = tmp_path / "cache"
    (first,) = _load(files, store)
    _edit_middle_keep_times(f)
    (again,) = _load(files, store)
    assert parses == [f.name, f.name]
    assert not np.array_equal(again.gpu_end_ns - again.gpu_start_ns,
                              first.gpu_end_ns - first.gpu_start_ns)


def test_beyond_the_full_hash_a_write_misses_by_its_ctime(tmp_path: Path, parses: list[str],
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(cache, "FULL_HASH_BYTES", 1000)  # every trace is "big"
    monkeypatch.setattr(cache, "SAMPLE_BYTES", 100)
    files, _ = write(PipelineSpec(stages=1, steps=40), tmp_path / "t")
    (f,) = files
    ident = cache.file_identity(f)
    assert ident is not None and {"ctime_ns", "ino", "mtime_ns", "samples"} <= set(ident)
    store = tmp_path / "cache"
    _load(files, store)
    _load(files, store)
    assert parses == [f.name]  # unchanged: a hit
    _edit_middle_keep_times(f)  # outside the samples, size and mtime kept: ctime moved
    _load(files, store)
    assert parses == [f.name, f.name]


def test_a_file_changed_during_its_read_is_not_kept(run4: list[Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "cache"
    real = registry.KinetoReader.read

    def edited_meanwhile(self, path, index, options):
        out = real(self, path, index, options)
        path.write_bytes(path.read_bytes() + b" ")
        return out

    monkeypatch.setattr(registry.KinetoReader, "read", edited_meanwhile)
    _load(run4[:1], store)
    assert not list(store.glob("*.npz"))


# ---------------------------------------------------------------- 7: an entry names its source
def test_another_traces_entry_copied_under_this_key_misses(run4: list[Path], tmp_path: Path,
                                                           parses: list[str]) -> None:
    store = tmp_path / "cache"
    want = _load(run4[:2], store)
    (a,) = store.glob("rank0.json.*.npz")
    (b,) = store.glob("rank1.json.*.npz")
    b.write_bytes(a.read_bytes())  # rank 0's timelines under rank 1's key
    parses.clear()
    got = _load(run4[:2], store)
    assert parses == ["rank1.json"]
    assert [t.rank for t in got] == [0, 1] and got[1].files == want[1].files


def test_another_files_stall_analyses_copied_under_this_key_miss(run4: list[Path],
                                                                  tmp_path: Path) -> None:
    store = tmp_path / "cache"
    read = ReadOptions(cache_dir=str(store))
    load_ranks(run4[:2], read=read, stall=StallOptions(), keep_timelines=False, jobs=1,
               progress=False)
    a, b = sorted(store.glob("ranks-*.json"))
    b.write_bytes(a.read_bytes())
    assert result_cache.load_stalls(b) is None and result_cache.load_stalls(a) is not None
    got = load_ranks(run4[:2], read=read, stall=StallOptions(), keep_timelines=False, jobs=1,
                     progress=False)
    assert [s.rank for s in got.stalls] == [0, 1]


def test_another_runs_result_copied_under_this_key_misses(run4: list[Path], tmp_path: Path
                                                          ) -> None:
    store = tmp_path / "cache"
    read = ReadOptions(cache_dir=str(store))
    first = analyze(run4, read=read, run=report_analyses(None), jobs=1, progress=False)
    (mine,) = store.glob("run-*.json")
    analyze(run4[:2], read=read, run=report_analyses(None), jobs=1, progress=False)
    (other,) = set(store.glob("run-*.json")) - {mine}
    mine.write_bytes(other.read_bytes())  # the 2-rank what-if under the 4-rank run's key
    again = analyze(run4, read=read, run=report_analyses(None), jobs=1, progress=False)
    assert report_json(again) == report_json(first)


# ---------------------------------------------------------------- 14: regular files only
def test_a_fifo_under_an_entry_name_is_a_miss(run4: list[Path], tmp_path: Path,
                                              unblocked: list[Path]) -> None:
    store = tmp_path / "cache"
    read = ReadOptions(cache_dir=str(store))
    first = analyze(run4, read=read, run=report_analyses(None), jobs=1, progress=False)
    entries = [*store.glob("*.npz"), *store.glob("ranks-*.json"), *store.glob("run-*.json")]
    assert len(entries) == 9
    for e in entries:
        e.unlink()
        os.mkfifo(e)
        unblocked.append(e)
    assert cache.load_entry(entries[0]) is None
    assert result_cache.load_stalls(store / next(store.glob("ranks-*.json")).name) is None
    again = analyze(run4, read=read, run=report_analyses(None), jobs=1, progress=False)
    assert report_json(again) == report_json(first)
    assert cache.load_entry(entries[0]) is not None  # written whole again over the FIFO
    assert cache.open_entry(tmp_path) is None  # a folder is no entry either


# ---------------------------------------------------------------- 16: the cache is no trace
def test_a_cache_inside_the_traced_folder_is_not_read_as_traces(run4: list[Path],
                                                                tmp_path: Path) -> None:
    d = run4[0].parent
    read = ReadOptions(cache_dir=str(d / ".cache"))
    first = analyze([d], read=read, run=report_analyses(None), jobs=1, progress=False)
    assert any((d / ".cache").glob("ranks-*.json"))
    again = analyze([d], read=read, run=report_analyses(None), jobs=1, progress=False)
    assert report_json(again) == report_json(first)
    # any tagged cache folder is left out, the cache in use or not
    assert trace_files([d]) == run4
    with pytest.raises(TraceError, match="a profplug cache folder"):
        trace_files([d / ".cache"])


def test_the_cache_in_use_is_left_out_before_it_is_tagged(run4: list[Path]) -> None:
    d = run4[0].parent
    (d / "c").mkdir()
    (d / "c" / "ranks-0.json").write_text("{}")
    assert d / "c" / "ranks-0.json" in trace_files([d])  # untagged: listed as a trace
    assert trace_files([d], cache_dir=d / "c") == run4


def test_the_cli_refuses_a_cache_inside_the_traces_before_writing(run4: list[Path]) -> None:
    """The library leaves a tagged cache out of a listing (above); the CLI does not make one
    inside an input at all: a later reader without profplug would take it for the run's."""
    d = run4[0].parent
    cmd = [sys.executable, "-m", "profplug", "report", str(d), "--cache", str(d / ".cache"),
           "--jobs", "1", "-f", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "lies inside the input" in r.stderr
    assert r.stderr.count("\n") == 1 and not (d / ".cache").exists()


# ---------------------------------------------------------------- 20: entries validated
def _tamper(entry: Path, change: object) -> None:
    """Rewrite the first Timeline of an npz entry with ``change(arrays, header)`` applied."""
    with np.load(entry, allow_pickle=False) as z:
        blobs = {k: z[k] for k in z.files}
    with np.load(io.BytesIO(blobs["t0"].tobytes()), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["__header__"]).decode())
    change(arrays, header)
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    blobs["t0"] = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    with open(entry, "wb") as fh:
        np.savez(fh, **blobs)


TAMPERED = {
    "unequal lengths": lambda a, h: a.update(gpu_end_ns=a["gpu_end_ns"][:-1]),
    "name id out of range": lambda a, h: a.update(
        gpu_name=a["gpu_name"] + np.int32(len(h["names"]))),
    "empty name table": lambda a, h: h.update(names=[]),
    "2-D step column": lambda a, h: a.update(step_num=a["step_num"].reshape(-1, 1)),
    "float times": lambda a, h: a.update(gpu_start_ns=a["gpu_start_ns"].astype(float)),
    "api_top out of range": lambda a, h: a.update(api_top=a["api_top"] + 10**6),
    "kind out of range": lambda a, h: a.update(gpu_kind=a["gpu_kind"] + np.int8(9)),
    "rank a string": lambda a, h: h.update(rank="0"),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_an_entry_whose_arrays_do_not_make_a_timeline_is_a_miss(
        case: str, run4: list[Path], tmp_path: Path, parses: list[str]) -> None:
    store = tmp_path / "cache"
    want = analyze(run4[:1], read=ReadOptions(cache_dir=str(store)), jobs=1, progress=False,
                   run=report_analyses(False, cross_rank=False))
    (entry,) = store.glob("*.npz")
    for kept in store.glob("ranks-*.json"):
        kept.unlink()  # the stall analyses: made again from the entry
    _tamper(entry, TAMPERED[case])
    assert cache.load_entry(entry) is None
    parses.clear()
    got = analyze(run4[:1], read=ReadOptions(cache_dir=str(store)), jobs=1, progress=False,
                  run=report_analyses(False, cross_rank=False))
    assert parses == ["rank0.json"]
    assert report_json(got) == report_json(want)


def test_a_timeline_from_the_reader_passes_the_checks(run4: list[Path]) -> None:
    (tl,) = load_ranks(run4[:1], jobs=1, progress=False).timelines
    assert cache.timeline_problem(tl) is None


STALLS_TAMPERED = {
    "gap columns of unequal lengths": lambda g: g["gaps"]["end_ns"].update(
        shape=[0], data=""),
    "gap cause out of range": lambda g: g["gaps"]["cause"].update(
        data=__import__("base64").b64encode(np.full(
            g["gaps"]["cause"]["shape"][0], 99, dtype=np.int64).tobytes()).decode()),
    "2-D step column": lambda g: g["step_starts_ns"].update(
        shape=[1, g["step_starts_ns"]["shape"][0]]),
}


@pytest.mark.parametrize("case", sorted(STALLS_TAMPERED))
def test_kept_stall_analyses_that_do_not_hold_together_are_a_miss(
        case: str, run4: list[Path], tmp_path: Path) -> None:
    store = tmp_path / "cache"
    read = ReadOptions(cache_dir=str(store))
    want = analyze(run4[:1], read=read, jobs=1, progress=False,
                   run=report_analyses(False, cross_rank=False))
    (entry,) = store.glob("ranks-*.json")
    key, _, body = entry.read_bytes().partition(b"\n")
    doc = json.loads(body)
    STALLS_TAMPERED[case](doc[0])
    entry.write_bytes(key + b"\n" + json.dumps(doc).encode())
    assert result_cache.load_stalls(entry) is None
    got = analyze(run4[:1], read=read, jobs=1, progress=False,
                  run=report_analyses(False, cross_rank=False))
    assert report_json(got) == report_json(want)


def test_an_old_result_entry_without_its_key_is_a_miss(tmp_path: Path) -> None:
    rc = result_cache.ResultCache(tmp_path, ["a"], None)

    a = AnalysisSpec(name="t", label="t", run=lambda tls, opt, ranks, memo: None, cache_key="t")
    rc._entry("t").write_bytes(b"none\nnull")  # the layout before entries named their key
    assert rc.get(a) is result_cache.MISS
    rc.put(a, None)
    assert rc.get(a) is None
