"""Nsight reader vs hostile or odd exports: views named like tables, runaway queries,
StringIds without its index, hot WAL / rollback journals, stale or partial exports beside a
report, .sqlite.gz bombs and SIGTERM while one is unpacked.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_inputs import hot_wal, recursive_view, seed_export, small_export, sql
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.nsys import reader, source
from profplug.analyzers.readers.nsys.reader import read_nsys
from synth import NsysExport


def names(tls: list) -> set[str]:
    return {n for t in tls for n in t.names}


@pytest.mark.parametrize(("table", "outcome"), [
    ("CUPTI_ACTIVITY_KIND_KERNEL", "read"), ("META_DATA_EXPORT", "read"),
    ("StringIds", "not an Nsight Systems export")])
def test_a_view_named_like_a_table_is_never_read(tmp_path: Path, table: str,
                                                 outcome: str) -> None:
    # given an export whose table is replaced by an endless recursive VIEW of that name
    (p,) = recursive_view(table)(tmp_path)
    # when read: the view is ignored (like a missing table), so the read ends
    if outcome == "read":
        tls = read_nsys(p)
        assert tls and all(t.source == "nsys" for t in tls)
        return
    with pytest.raises(TraceError, match=outcome):
        read_nsys(p)


def test_a_query_past_its_step_budget_stops_with_one_line(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    p = small_export(tmp_path)
    monkeypatch.setattr(source, "MIN_STEPS", 1000)
    monkeypatch.setattr(source, "STEPS_PER_BYTE", 0)
    monkeypatch.setattr(source, "PROGRESS_EVERY", 10)
    with pytest.raises(TraceError, match=r"report\.sqlite: unreadable .*more than 1,000 SQLite "
                                         r"steps, too many for a file this size"):
        read_nsys(p, workers=1)


def test_a_table_with_computed_columns_is_ignored(tmp_path: Path) -> None:
    p = sql(small_export(tmp_path), "CREATE TABLE n2 AS SELECT * FROM NVTX_EVENTS",
            "DROP TABLE NVTX_EVENTS",
            "CREATE TABLE NVTX_EVENTS (start INTEGER, eventType INTEGER, text TEXT, "
            "globalTid INTEGER, \"end\" INTEGER AS (length(zeroblob(100000000))))")
    (tl,) = read_nsys(p)
    assert "NVTX_EVENTS has computed columns: ignored" in tl.warnings


def vm_steps(p: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """SQLite VM steps (in thousands) over every connection of one read."""
    total = [0]
    guard = source.guard

    def counting(conn: sqlite3.Connection, steps: int) -> None:
        guard(conn, steps)

        def tick() -> int:
            total[0] += 1
            return 0

        conn.set_progress_handler(tick, 1000)

    monkeypatch.setattr(source, "guard", counting)
    monkeypatch.setattr(reader, "guard", counting)
    read_nsys(p, workers=1)
    return total[0]


def unindexed(tmp: Path, n: int) -> Path:
    ex = NsysExport()
    p = ex.process()
    for k in range(n):
        p.launch(10.0 * k, 10.0 * k + 2, 5, name=f"kernel_{k}")
    db = ex.write(tmp / f"r{n}.sqlite")
    return sql(db, "CREATE TABLE s2 (id INTEGER, value TEXT)",
               "INSERT INTO s2 SELECT * FROM StringIds", "DROP TABLE StringIds",
               "ALTER TABLE s2 RENAME TO StringIds")


def test_stringids_without_index_is_scanned_once_per_lookup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given exports of n and 4n distinct names whose StringIds has no index on id
    small, big = vm_steps(unindexed(tmp_path, 1000), monkeypatch), \
        vm_steps(unindexed(tmp_path, 4000), monkeypatch)
    # then SQLite's work grows with the rows, not rows x names (500 ids per IN: ~16x)
    assert big < 6 * small, (small, big)


def files_beside(p: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in p.parent.iterdir()}


def test_hot_wal_is_read_from_a_private_copy(tmp_path: Path) -> None:
    # given an export whose last transaction is only in its -wal (the writer was killed)
    (p,) = hot_wal(tmp_path)
    assert (tmp_path / "report.sqlite-wal").stat().st_size > 0
    before = files_beside(p)
    # when read, then that transaction is seen (the sync was renamed in it) ...
    (tl,) = read_nsys(p)
    assert "cudaStreamSynchronize_v3020" in tl.names
    assert "cudaDeviceSynchronize_v3020" not in tl.names
    # ... and nothing beside the export was created or changed
    assert files_beside(p) == before


def test_wal_mode_export_creates_nothing_beside_it(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    p = sql(small_export(ro), "PRAGMA journal_mode=WAL")
    assert sorted(f.name for f in ro.iterdir()) == ["report.sqlite"]
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        (tl,) = read_nsys(p)
        assert sorted(f.name for f in ro.iterdir()) == ["report.sqlite"]  # no -wal, -shm
    finally:
        ro.chmod(0o755)
    assert tl.n_gpu == 2


def test_hot_rollback_journal_is_rolled_back_in_a_copy(tmp_path: Path) -> None:
    # given an export whose writer died mid-transaction: the main file holds uncommitted
    # pages (names rewritten), the -journal holds the originals
    p = small_export(tmp_path)
    code = ("import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('PRAGMA cache_size=1'); c.execute('BEGIN'); "
            "c.execute(\"UPDATE StringIds SET value = 'UNCOMMITTED' || id\"); "
            "c.execute('CREATE TABLE pad AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL "
            "SELECT n + 1 FROM r WHERE n < 20000) SELECT n, randomblob(200) FROM r'); "
            "os._exit(0)")
    subprocess.run([sys.executable, "-c", code, str(p)], check=True)
    assert (tmp_path / "report.sqlite-journal").stat().st_size > 0
    raw = p.read_bytes()
    assert b"UNCOMMITTED" in raw  # the main file really is half-written
    before = files_beside(p)
    # when read, then the committed names are seen, and the user's files are untouched
    (tl,) = read_nsys(p)
    assert "gemm_kernel" in tl.names and not [n for n in tl.names if "UNCOMMITTED" in n]
    assert files_beside(p) == before


def fake_nsys(tmp: Path, good: Path) -> Path:
    """An ``nsys`` that 'exports' by copying ``good`` to --output."""
    exe = tmp / "nsys"
    exe.write_text(f"#!{sys.executable}\nimport shutil, sys\n"
                   "out = sys.argv[sys.argv.index('--output') + 1]\n"
                   f"shutil.copyfile({str(good)!r}, out)\n")
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("problem", ["older than the report", "partial"])
def test_stale_or_partial_export_beside_its_report(tmp_path: Path, problem: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # given report.nsys-rep and a report.sqlite that is older, or lacks the RUNTIME table
    run = tmp_path / "run"
    run.mkdir()
    rep = run / "report.nsys-rep"
    rep.write_bytes(b"a report")
    db = small_export(run)
    if problem == "partial":
        sql(db, "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    else:
        os.utime(db, (1_000_000_000, 1_000_000_000))
    monkeypatch.delenv("PROFPLUG_NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-dir"))
    # when read without nsys: one line that says why and how to fix it
    for path in (run, db):
        with pytest.raises(TraceError) as ei:
            from profplug.analyzers.scale.load import load_timelines
            load_timelines([path], jobs=1)
        msg = str(ei.value)
        assert msg.startswith(f"{rep}: its export report.sqlite is") and problem in msg
        assert f"--force-overwrite true --output {db} {rep}" in msg
    # when read with nsys: exported again, then read
    good = small_export(tmp_path, name="good.sqlite")
    (tl,) = read_nsys(db, nsys=fake_nsys(tmp_path, good))
    assert tl.n_gpu == 2 and tl.warnings == []
    assert source.export_problem(db, rep) is None


def test_export_without_runtime_table_warns(tmp_path: Path) -> None:
    p = sql(small_export(tmp_path), "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    (tl,) = read_nsys(p)
    assert any("no CUPTI_ACTIVITY_KIND_RUNTIME table" in w for w in tl.warnings)


def test_odd_table_name_and_odd_rank_mark_do_not_reject_the_export(tmp_path: Path) -> None:
    p = sql(small_export(tmp_path, mark="profplug.rank \u00b2"),
            'CREATE TABLE "we""ird" (a INTEGER)')
    (tl,) = read_nsys(p)
    assert tl.rank == 0 and tl.rank_rule.startswith("CUDA device order")


def sqlite_gz(tmp: Path, pages: int, zeros_mb: int) -> Path:
    """A .sqlite.gz: a real SQLite header announcing ``pages`` pages, then zeros."""
    head = bytearray(seed_export(tmp, "seed.sqlite").read_bytes()[:4096])
    head[28:32] = pages.to_bytes(4, "big")
    p = tmp / "report.sqlite.gz"
    c = gzip.GzipFile(p, "wb", compresslevel=1)
    c.write(bytes(head))
    for _ in range(zeros_mb):
        c.write(b"\0" * (1 << 20))
    c.close()
    return p


def test_sqlite_gz_checked_before_anything_is_written(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    zeros = tmp_path / "zeros.sqlite.gz"
    zeros.write_bytes(gzip.compress(b"\0" * (8 << 20)))
    with pytest.raises(TraceError, match="not a SQLite file"):
        read_nsys(zeros)
    with pytest.raises(TraceError, match="inflates to more than 2 GiB"):
        read_nsys(sqlite_gz(tmp_path, 1 << 30, 1))  # announces 4 TiB
    monkeypatch.setenv("PROFPLUG_MAX_DECOMPRESSED", "4M")
    with pytest.raises(TraceError, match="inflates to more than 4 MiB"):
        read_nsys(sqlite_gz(tmp_path, 1, 8))  # announces 4 KiB, inflates to 8 MiB
    assert list(tmp.iterdir()) == []


def test_sigterm_while_unpacking_leaves_no_temp_file(tmp_path: Path) -> None:
    # given a .sqlite.gz that takes a while to unpack (a header, then 512 MB of zeros)
    p = sqlite_gz(tmp_path, (512 << 20) // 4096, 512)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "profplug", "report", str(p)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # when SIGTERM arrives while the temporary file exists
    deadline = time.time() + 60
    while not list(tmp.glob("profplug-*")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    # then profplug ends without a traceback and removes it
    assert proc.returncode == 143, (proc.returncode, err)
    assert "Traceback" not in err
    assert list(tmp.iterdir()) == []
