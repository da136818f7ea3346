"""Nsight Systems reader on synthetic SQLite exports with exactly known answers (us)."""

from __future__ import annotations

import os
import random
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from profplug.analyzers import StallOptions, analyze
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.core.timeline import launch_times
from profplug.analyzers.readers.nsys.reader import RULE_MARK, RULE_ORDER, read_nsys
from profplug.analyzers.report.analysis import rank_dict
from profplug.analyzers.stalls.rank import analyze_rank
from synth import OPTIONAL, KinetoTrace, NsysExport, NsysProcess, check_sums

Recorder = Any  # KinetoTrace or NsysProcess: same recording methods


def scenario(t: Recorder) -> None:
    """Every cause, a linked stream wait, call sites and two steps (Kineto-compatible)."""
    t.annotation("profplug.step", 0, 14)
    t.annotation("profplug.step", 15, 25)
    t.launch(0, 0, 10)  # GPU busy 0-10
    t.annotation("profplug.recv_from_prev_pipeline_rank_", 4, 10)
    t.annotation("profplug.sync.device", 5, 8)
    t.runtime("cudaDeviceSynchronize", 5, 7)  # gap 10-16 -> device_sync
    t.launch(15, 16, 4)
    t.launch(20, 25, 5, stream=7)  # gap 20-25 -> host_bound
    rec = t.runtime("cudaEventRecord", 26, 0.5)
    wait = t.runtime("cudaStreamWaitEvent", 26.5, 0.5)
    t.cuda_sync("Stream Wait Event", 26.5, 0, stream=13, corr=wait, wait_on_stream=7,
                wait_corr=rec)
    t.launch(27, 30, 1, stream=13)  # waits for stream 7 (ends 30): no stall
    t.runtime("cudaStreamSynchronize", 28, 3)  # gap 31-33 -> event_sync
    t.launch(32, 33, 2)
    t.gpu(36, 1, "[CUDA memcpy DtoH]", cat="gpu_memcpy")  # gap 35-36: host_bound


def report(paths: list[Path], tol_us: float = 2.0) -> Any:
    rep = analyze(paths, StallOptions(tolerance_ns=round(tol_us * 1000)), jobs=1)
    check_sums(rep)
    return rep


def comparable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("source", "files", "rank_rule", "warnings")}


def one_process(style: str = "2025.3", **kw: Any) -> tuple[NsysExport, NsysProcess]:
    ex = NsysExport(style=style, **kw)
    return ex, ex.process(4242)


def test_same_scenario_same_answer_as_kineto(tmp_path: Path) -> None:
    k = KinetoTrace(rank=0)
    scenario(k)
    ex, p = one_process()
    scenario(p)
    rk = report([k.write(tmp_path / "k.json")]).rank(0)
    rn = report([ex.write(tmp_path / "n.sqlite")]).rank(0)
    assert rn.idle_by_cause_us() == {"device_sync": 6.0, "event_sync": 2.0,
                                     "host_bound": 6.0, "other": 0.0}
    assert rn.idle_by_cause_us() == rk.idle_by_cause_us()
    assert comparable(rank_dict(rn)) == comparable(rank_dict(rk))
    assert rn.source == "nsys" and rn.stream_waits[0].linked == 1


@pytest.mark.parametrize("style", ["2022.4", "2025.3"])
@pytest.mark.parametrize("registered", [False, True])
def test_schema_styles_and_nvtx_text_forms(tmp_path: Path, style: str, registered: bool
                                           ) -> None:
    ex, p = one_process(style, api_suffix=(style == "2025.3"), registered=registered)
    scenario(p)
    p.domain_create("profplug")
    (tl,) = read_nsys(ex.write(tmp_path / "x.sqlite"))
    meta_table = "EXPORT_META_DATA" if style == "2022.4" else "META_DATA_EXPORT"
    assert tl.metadata["meta_table"] == meta_table
    assert tl.metadata["schema_version"] == ("3.0.0" if style == "2022.4" else "3.20.1")
    anns = sorted(tl.names[i] for i in tl.ann_name)
    assert anns == ["profplug.recv_from_prev_pipeline_rank_", "profplug.step", "profplug.step",
                    "profplug.sync.device"]
    assert tl.step_num.tolist() == [0, 1]
    assert tl.has_gpu_sync_records
    r = report([tmp_path / "x.sqlite"]).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 6.0
    assert r.callsites[0].callsite == ("profplug.recv_from_prev_pipeline_rank_ > "
                                       "profplug.sync.device")


def test_start_end_ranges_are_annotations(tmp_path: Path) -> None:
    ex, p = one_process()
    p.launch(0, 0, 10)
    p.annotation("layer_3", 2, 20, start_end=True, domain=5)
    p.runtime("cudaDeviceSynchronize", 5, 7)
    p.launch(15, 16, 4)
    r = report([ex.write(tmp_path / "x.sqlite")]).rank(0)
    assert [c.callsite for c in r.callsites] == ["layer_3"]


def two_ranks(marks: bool) -> NsysExport:
    """pid 300 on device 1 and pid 200 on device 0, same correlation ids in both."""
    ex = NsysExport()
    a, b = ex.process(300), ex.process(200)
    if marks:
        a.rank_mark(0)
        b.rank_mark(1)
    for proc, dev, t0 in ((a, 1, 0.0), (b, 0, 100.0)):
        proc.launch(t0, t0, 10, device=dev)
        proc.runtime("cudaDeviceSynchronize", t0 + 5, 7)
        proc.launch(t0 + 15, t0 + 16, 4, device=dev)
    return ex


@pytest.mark.parametrize("marks", [True, False])
def test_multi_process_split_into_ranks(tmp_path: Path, marks: bool) -> None:
    tls = read_nsys(two_ranks(marks).write(tmp_path / "x.sqlite"))
    by_rank = {t.rank: t for t in tls}
    want_pid = {0: 300, 1: 200} if marks else {0: 200, 1: 300}  # marks, else device order
    assert {r: t.metadata["pid"] for r, t in by_rank.items()} == want_pid
    assert {t.rank_rule for t in tls} == {RULE_MARK if marks else RULE_ORDER}
    for t in tls:  # each op joins its own process's launch (correlation ids collide)
        t0 = 0 if t.metadata["pid"] == 300 else 100_000
        assert launch_times(t).tolist() == [t0, t0 + 15_000]
        assert t.gpu_corr.tolist() == [101, 103]
    rep = report([tmp_path / "x.sqlite"])
    assert [r.idle_by_cause_us()["device_sync"] for r in rep.ranks] == [6.0, 6.0]


def test_partial_marks_and_processes_without_gpu_work(tmp_path: Path) -> None:
    ex = NsysExport()
    launcher = ex.process(10, "torchrun")
    launcher.runtime("cudaGetDeviceCount", 0, 1)
    a, b, c = ex.process(500), ex.process(400), ex.process(600)
    c.rank_mark(0)
    for proc, dev in ((a, 0), (b, 1), (c, 2)):
        proc.launch(0, 0, 10, device=dev)
    tls = read_nsys(ex.write(tmp_path / "x.sqlite"))
    assert [(t.rank, t.metadata["pid"], t.rank_rule) for t in tls] == [
        (0, 600, RULE_MARK), (1, 500, RULE_ORDER), (2, 400, RULE_ORDER)]
    assert "pid 10" in " ".join(w for t in tls for w in t.warnings)


@pytest.mark.parametrize("omit", [set(OPTIONAL), {"NVTX_EVENTS"},
                                  {"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"},
                                  {"CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMCPY"},
                                  {"CUPTI_ACTIVITY_KIND_CUDA_EVENT"}])
def test_missing_optional_tables(tmp_path: Path, omit: set[str]) -> None:
    ex, p = one_process(omit=omit)
    scenario(p)
    (tl,) = read_nsys(ex.write(tmp_path / "x.sqlite"))
    assert tl.has_gpu_sync_records == ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" not in omit)
    assert tl.ann_name.size == (0 if "NVTX_EVENTS" in omit else 4)
    n_copy = int((tl.gpu_kind == 1).sum())
    assert n_copy == (0 if "CUPTI_ACTIVITY_KIND_MEMCPY" in omit else 1)
    if "CUPTI_ACTIVITY_KIND_CUDA_EVENT" in omit and tl.has_gpu_sync_records:
        assert tl.gsync_wait_corr.tolist() == [-1]  # unknown, not guessed
    r = report([tmp_path / "x.sqlite"]).rank(0)
    assert r.idle_by_cause_us()["device_sync"] == 6.0


def test_sync_records_and_wait_links(tmp_path: Path) -> None:
    ex, p = one_process()
    scenario(p)
    p.cuda_sync("Context Sync", 5, 7, stream=-1, corr=999)
    (tl,) = read_nsys(ex.write(tmp_path / "x.sqlite"))
    assert tl.gsync_kind.tolist() == [2, 4]
    assert tl.gsync_wait_stream.tolist() == [7, -1]
    assert tl.gsync_wait_corr.tolist() == [105, -1]  # the cudaEventRecord's correlation id
    assert tl.gsync_start_ns.tolist() == [26_500, 5_000]


def test_gz_export_reads_the_same_and_leaves_no_temp_file(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    ex, p = one_process()
    scenario(p)
    tmpd = tmp_path / "tmp"
    tmpd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpd))
    plain = rank_dict(report([ex.write(tmp_path / "a.sqlite")]).rank(0))
    gz = rank_dict(report([ex.write(tmp_path / "b.sqlite.gz")]).rank(0))
    assert comparable(gz) == comparable(plain)
    assert list(tmpd.iterdir()) == []


def test_device_sync_count_and_total_match_direct_sql(tmp_path: Path) -> None:
    rng = random.Random(7)
    ex = NsysExport()
    for rank, pid in enumerate((31, 32, 33)):
        p = ex.process(pid)
        p.rank_mark(rank)
        t = 0.0
        for _ in range(rng.randint(20, 60)):
            d = rng.randint(1, 900) + rng.randint(0, 999) / 1000
            p.launch(t, t + 1, rng.randint(1, 50), device=rank)
            p.runtime("cudaDeviceSynchronize", t + 2, d)
            p.runtime("cudaStreamSynchronize", t + 3 + d, 1)
            t += d + 60
    path = ex.write(tmp_path / "x.sqlite")
    con = sqlite3.connect(path)
    want = {pid: (n, tot) for pid, n, tot in con.execute(
        "SELECT (r.globalTid >> 24) & 0xFFFFFF, COUNT(*), SUM(r.end - r.start) "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaDeviceSynchronize%' GROUP BY 1")}
    con.close()
    rep = report([path])
    pids = {t.rank: t.metadata["pid"] for t in read_nsys(path)}
    for r in rep.ranks:
        (s,) = [s for s in r.syncs if s.api == "cudaDeviceSynchronize"]
        n, tot_ns = want[pids[r.rank]]
        assert (s.count, round(s.host_blocked_us * 1000)) == (n, tot_ns)


# ---------------------------------------------------------------- files and errors
def test_not_sqlite_and_not_nsight(tmp_path: Path) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_text("hello")
    with pytest.raises(TraceError, match=r"x\.sqlite: not a SQLite file"):
        read_nsys(bad)
    other = tmp_path / "y.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (a INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(TraceError, match=r"y\.sqlite: SQLite file is not an Nsight"):
        read_nsys(other)
    gz = tmp_path / "z.sqlite.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(TraceError, match=r"z\.sqlite\.gz: corrupt or truncated gzip"):
        read_nsys(gz)


def test_export_without_gpu_work_is_an_error(tmp_path: Path) -> None:
    ex, p = one_process()
    p.runtime("cudaGetDeviceCount", 0, 1)
    with pytest.raises(TraceError, match="no CUDA kernels"):
        read_nsys(ex.write(tmp_path / "x.sqlite"))


def test_report_without_nsys_says_what_to_run(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"binary")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("PROFPLUG_NSYS", raising=False)
    with pytest.raises(TraceError) as ei:
        read_nsys(rep)
    assert f"nsys export --type sqlite --output {tmp_path / 'run.sqlite'} {rep}" in str(ei.value)


def test_report_is_exported_once_and_cached(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ex, p = one_process()
    scenario(p)
    src = ex.write(tmp_path / "src.sqlite")
    fake = tmp_path / "fake-nsys"
    count = tmp_path / "count"
    # Stands in for nsys: copies the prepared export to the --output path, counts calls.
    fake.write_text(f'#!/bin/sh\necho x >> {count}\nwhile [ "$1" != "--output" ]; do shift; '
                    f'done\ncp {src} "$2"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PROFPLUG_NSYS", str(fake))
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"binary")
    os.utime(rep, (1, 1))
    (a,) = read_nsys(rep)
    (b,) = read_nsys(rep)
    assert (tmp_path / "run.sqlite").is_file()
    assert count.read_text().count("x") == 1
    assert np.array_equal(a.gpu_start_ns, b.gpu_start_ns) and a.n_gpu == 6


def test_directory_with_report_and_export_reads_export_once(tmp_path: Path) -> None:
    ex, p = one_process()
    scenario(p)
    (tmp_path / "run.nsys-rep").write_bytes(b"binary")
    os.utime(tmp_path / "run.nsys-rep", (1_000_000_000, 1_000_000_000))  # exported after
    ex.write(tmp_path / "run.sqlite")
    rep = report([tmp_path])
    assert [r.files for r in rep.ranks] == [[str(tmp_path / "run.sqlite")]]
    assert rep.to_dict()["ranks"][0]["source"] == "nsys"


# ------------------------------------------------ real exports: threads and wait links
SAMPLES = Path(__file__).resolve().parents[5] / "sample_traces"
REAL = SAMPLES / "pp2_infer_nsys" / "event" / "report.sqlite.gz"


def timeline_fields(tl: Any) -> dict[str, Any]:
    return {k: (v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v
            for k, v in vars(tl).items()}


def test_threaded_read_gives_the_serial_timelines(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a real export and blocks small enough that every table is split for the threads
    from profplug.analyzers.readers.nsys import fetch

    serial = read_nsys(REAL, workers=1)
    blocks: list[int] = []

    class Pool(fetch.ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kw: Any) -> Any:
            blocks.append(args[0])
            return super().submit(fn, *args, **kw)

    monkeypatch.setattr(fetch, "ThreadPoolExecutor", Pool)
    monkeypatch.setattr(fetch, "MIN_CHUNK_ROWS", 50)
    monkeypatch.setattr(fetch, "PARALLEL_MIN_ROWS", 100)
    # when it is read on three threads
    threaded = read_nsys(REAL, workers=3)
    # then the tables went through the pool in many blocks, and nothing changed
    assert len(blocks) >= 40
    assert [timeline_fields(t) for t in threaded] == [timeline_fields(t) for t in serial]
    assert sum(int((t.gsync_wait_corr >= 0).sum()) for t in serial) == 290 + 1657


def test_wait_links_equal_a_direct_sql_lookup(tmp_path: Path) -> None:
    # given a real export with linked stream waits
    import gzip
    import shutil

    db = tmp_path / "r.sqlite"
    with gzip.open(REAL) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(db)
    pid = "((s.globalPid >> 24) & 16777215)"
    rows = con.execute(
        f"SELECT {pid}, "
        "(SELECT e.streamId FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT e WHERE "
        f"((e.globalPid >> 24) & 16777215) = {pid} AND e.eventId = s.eventId AND "
        "e.correlationId < s.correlationId ORDER BY e.correlationId DESC, e.rowid DESC "
        "LIMIT 1), "
        "(SELECT MAX(e.correlationId) FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT e WHERE "
        f"((e.globalPid >> 24) & 16777215) = {pid} AND e.eventId = s.eventId AND "
        "e.correlationId < s.correlationId) "
        "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s WHERE syncType BETWEEN 1 AND 4 "
        "ORDER BY s.rowid").fetchall()
    con.close()
    # when the reader links them, then each wait has the record SQL finds (or -1, -1)
    for tl in read_nsys(db):
        want = [(-1 if s is None else s, -1 if c is None else c)
                for p, s, c in rows if p == tl.metadata["pid"]]
        got = list(zip(tl.gsync_wait_stream.tolist(), tl.gsync_wait_corr.tolist(),
                       strict=True))
        assert got == want and sum(c >= 0 for _, c in got) > 200


def test_wait_links_general_path_equals_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a real export whose ids fit the shifted int64 keys (the fast path)
    from profplug.analyzers.readers.nsys import links

    fast = read_nsys(REAL, workers=1)
    # when the general path (pair and corr ranks) links the waits instead
    monkeypatch.setattr(links, "FAST_LINKS", False)
    general = read_nsys(REAL, workers=1)
    # then every link is the same
    assert [(t.gsync_wait_stream.tolist(), t.gsync_wait_corr.tolist()) for t in general] == \
        [(t.gsync_wait_stream.tolist(), t.gsync_wait_corr.tolist()) for t in fast]


def test_threaded_read_with_rowid_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a real export with rows deleted here and there (rowid gaps in the big tables)
    import gzip
    import shutil

    from profplug.analyzers.readers.nsys import fetch

    db = tmp_path / "gaps.sqlite"
    with gzip.open(REAL) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid % 7 = 3")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid BETWEEN 100 AND 400")
    con.commit()
    left = dict(con.execute("SELECT (globalTid >> 24) & 16777215, COUNT(*) "
                            "FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY 1").fetchall())
    con.close()
    serial = read_nsys(db, workers=1)
    # when it is read in small blocks on threads
    monkeypatch.setattr(fetch, "MIN_CHUNK_ROWS", 64)
    monkeypatch.setattr(fetch, "PARALLEL_MIN_ROWS", 128)
    threaded = read_nsys(db, workers=2)
    # then the gaps are squeezed out exactly as the serial read does
    assert [timeline_fields(t) for t in threaded] == [timeline_fields(t) for t in serial]
    assert [t.api_start_ns.size for t in threaded] == [left[t.metadata["pid"]] for t in serial]


def _process(ex: NsysExport, t0: float, vm: int = 0, pid: int = 4242) -> None:
    p = ex.process(pid=pid)
    p.vm = vm
    for k in range(12):
        p.launch(t0 + 100.0 * k, t0 + 100.0 * k + 2, 50.0)
        p.runtime("cudaDeviceSynchronize", t0 + 100.0 * k + 3, 60.0)


def test_one_pid_on_two_hosts_is_two_ranks(tmp_path: Path) -> None:
    # given one export holding two processes with pid 4242 on two VMs (globalPid top bits)
    ex = NsysExport()
    _process(ex, 0.0, vm=0)
    _process(ex, 5000.0, vm=1)
    tls = read_nsys(ex.write(tmp_path / "r.sqlite"))
    # then they are two ranks of 1,152 us each, not one of 6,152 us with phantom idle time
    assert len(tls) == 2
    for tl in tls:
        r = analyze_rank(tl)
        assert r.devices[0].gpu.window_us == 1150.0
        assert r.devices[0].idle_by_cause_us["host_bound"] == 0.0
        assert tl.metadata["pid"] == 4242


def test_a_null_global_pid_is_counted_not_a_rank(tmp_path: Path) -> None:
    ex = NsysExport()
    _process(ex, 0.0)
    db = ex.write(tmp_path / "r.sqlite")
    con = sqlite3.connect(db)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE rowid = 3")
    con.commit()
    con.close()
    (tl,) = read_nsys(db)
    assert tl.n_gpu == 11 and tl.skipped == {"no process (NULL globalPid)": 1}


def test_a_sync_whose_name_id_dangles_is_warned(tmp_path: Path) -> None:
    ex = NsysExport()
    _process(ex, 0.0)
    db = ex.write(tmp_path / "r.sqlite")
    con = sqlite3.connect(db)
    con.execute("DELETE FROM StringIds WHERE value LIKE 'cudaDeviceSynchronize%'")
    con.commit()
    con.close()
    (tl,) = read_nsys(db)
    (w,) = [w for w in tl.warnings if "StringIds" in w]
    assert w.startswith("12 host call(s) named by an id missing from StringIds")
