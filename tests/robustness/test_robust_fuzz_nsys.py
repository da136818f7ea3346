"""Fuzz the Nsight reader with mutated real exports: Timelines or a TraceError, nothing else;
and Timelines go through the default report (what-if and cross-rank included, every format)
without an optional analysis failing (``default_report``).

Seed: sample_traces/pp2_infer_nsys/device/report.sqlite.gz (a real 2x H200 export).
Mutations: flipped bytes, a cut file, a dropped table, a row field set to NULL / text /
bad UTF-8 / a blob / a huge or negative integer / a float, StringIds rows deleted, flipped
bytes in the .gz, and a table replaced by an endless recursive VIEW of its name.
Bounded: 60 examples (each through the default report), about 20 s.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
from pathlib import Path

from default_report import default_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.nsys.reader import read_nsys

ROOT = Path(__file__).resolve().parents[2]
SEED_GZ = ROOT / "sample_traces" / "pp2_infer_nsys" / "device" / "report.sqlite.gz"
SEED = gzip.decompress(SEED_GZ.read_bytes())


def _schema() -> dict[str, tuple[list[str], int]]:
    """table -> (columns, rows) of the seed export."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".sqlite") as f:
        f.write(SEED)
        f.flush()
        conn = sqlite3.connect(f.name)
        out = {}
        for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
            n = conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            out[t] = (cols, n)
        conn.close()
    return out


SCHEMA = _schema()
TABLES = sorted(SCHEMA)
READ = [t for t in TABLES if t.startswith(("CUPTI_", "NVTX", "StringIds", "META", "PROCESSES"))]
VALUES = st.one_of(
    st.none(), st.text(max_size=8), st.just(b"\xff\xfe bad utf-8"), st.binary(max_size=8),
    st.sampled_from([2**63 - 1, -(2**63), -1, 0, 1 << 40]), st.floats(allow_nan=True),
    st.integers(-(2**63), 2**63 - 1),
)
mutation = st.one_of(
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, len(SEED) - 1),
                                                  st.integers(0, 255)), min_size=1,
                                        max_size=16)),
    st.tuples(st.just("cut"), st.integers(0, len(SEED))),
    st.tuples(st.just("drop"), st.sampled_from(TABLES)),
    st.tuples(st.just("set"), st.sampled_from(READ).flatmap(
        lambda t: st.tuples(st.just(t), st.sampled_from(SCHEMA[t][0]),
                            st.integers(1, max(SCHEMA[t][1], 1)), VALUES))),
    st.tuples(st.just("strings"), st.integers(1, 50)),
    st.tuples(st.just("view"), st.sampled_from(READ)),  # an endless VIEW named like a table
    st.tuples(st.just("gzflip"), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                          min_size=1, max_size=4)),
)


def _sql(path: Path, *stmts: tuple[str, tuple]) -> None:
    conn = sqlite3.connect(path)
    for q, args in stmts:
        conn.execute(q, args)
    conn.commit()
    conn.close()


def build(tmp: Path, m: tuple) -> Path:
    kind, arg = m
    db = tmp / "report.sqlite"
    db.unlink(missing_ok=True)
    if kind == "flip":
        b = bytearray(SEED)
        for pos, val in arg:
            b[pos] = val
        db.write_bytes(bytes(b))
    elif kind == "cut":
        db.write_bytes(SEED[:arg])
    elif kind == "gzflip":
        gz = bytearray(SEED_GZ.read_bytes())
        for pos, val in arg:
            gz[pos % len(gz)] = val
        out = tmp / "report.sqlite.gz"
        out.write_bytes(bytes(gz))
        return out
    else:
        db.write_bytes(SEED)
        if kind == "drop":
            _sql(db, (f'DROP TABLE "{arg}"', ()))
        elif kind == "set":
            table, col, row, value = arg
            _sql(db,  # the copy drops NOT NULL, as a corrupt file may
                 (f'CREATE TABLE fz AS SELECT * FROM "{table}"', ()),
                 (f'DROP TABLE "{table}"', ()), (f'ALTER TABLE fz RENAME TO "{table}"', ()),
                 (f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (value, row)))
        elif kind == "view":
            cols = ", ".join(f'n AS "{c}"' for c in SCHEMA[arg][0])
            _sql(db, (f'DROP TABLE "{arg}"', ()),
                 (f'CREATE VIEW "{arg}" AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL '
                  f"SELECT n + 1 FROM r) SELECT {cols} FROM r", ()))
        else:  # delete every arg-th StringIds row
            _sql(db, ("DELETE FROM StringIds WHERE id % ? = 0", (arg,)))
    return db


@settings(max_examples=int(os.environ.get("PROFPLUG_FUZZ_EXAMPLES", "60")), deadline=None,
          database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(m=mutation)
def test_mutated_exports_never_crash(tmp_path: Path, m: tuple) -> None:
    p = build(tmp_path, m)
    try:
        timelines = read_nsys(p)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(p) in str(exc)
        return
    assert timelines
    default_report(timelines)  # whatever was read must also go through the default report


def test_seed_reads_two_ranks(tmp_path: Path) -> None:
    shutil.copy(SEED_GZ, tmp_path / "r.sqlite.gz")
    assert [t.rank for t in read_nsys(tmp_path / "r.sqlite.gz")] == [0, 1]
