"""Traces are untrusted input: no eval/pickle/shell on them; SQLite opened read-only; a
command suggested for pasting quotes the paths it names."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shlex
import sqlite3
from pathlib import Path

import pytest
from profplug.analyzers.readers.nsys.reader import read_nsys
from profplug.analyzers.readers.nsys.source import open_export
from profplug.analyzers.report.analysis import analyze
from synth import one_error

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SEED_GZ = ROOT / "sample_traces" / "pp2_infer_nsys" / "device" / "report.sqlite.gz"
# Code that would run or unpickle trace data, or hand strings to a shell.
FORBIDDEN = re.compile(r"(?<![\w.])(eval|exec)\(|\bpickle\.(loads?|Unpickler)|import pickle|allow_pickle=True"
                       r"|shell=True|os\.system\(|os\.popen\(|\bmarshal\.|yaml\.load\(")
SCANNED = ("analyzers", "profplug/cli", "profplug/session")


def scan(root: Path) -> list[str]:
    hits = []
    for top in SCANNED:
        p = root / top
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.exists() else []:
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if FORBIDDEN.search(line):
                    hits.append(f"{f.relative_to(root)}:{n}: {line.strip()}")
    return hits


def test_no_eval_pickle_or_shell_in_the_code() -> None:
    assert scan(ROOT) == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "analyzers" / "x.py"
    bad.parent.mkdir()
    lines = ["eval(s)", "np.load(p, allow_pickle=True)", "pickle.loads(b)",
             "subprocess.run(c, shell=True)", "os.system(c)", "model.eval()", "literal_eval(s)"]
    bad.write_text("\n".join(lines))
    assert [h.split(": ", 1)[1] for h in scan(tmp_path)] == lines[:5]


@pytest.fixture
def export(tmp_path: Path) -> Path:
    db = tmp_path / "ro" / "report.sqlite"
    db.parent.mkdir()
    db.write_bytes(gzip.decompress(SEED_GZ.read_bytes()))
    os.utime(db, (1_000_000_000, 1_000_000_000))
    db.chmod(0o444)
    return db


def test_analysis_leaves_the_export_untouched(export: Path) -> None:
    digest = hashlib.sha256(export.read_bytes()).hexdigest()
    st = export.stat()
    rep = analyze([export], jobs=1)
    assert [r.rank for r in rep.ranks] == [0, 1]
    assert hashlib.sha256(export.read_bytes()).hexdigest() == digest
    assert (export.stat().st_mtime_ns, export.stat().st_size) == (st.st_mtime_ns, st.st_size)
    assert [p.name for p in export.parent.iterdir()] == ["report.sqlite"]  # no -journal/-wal


def test_export_connection_is_read_only(export: Path) -> None:
    ex = open_export(export, export)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ex.conn.execute("CREATE TABLE injected (a)")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ex.conn.execute("DELETE FROM StringIds")
    finally:
        ex.conn.close()
    assert len(read_nsys(export)) == 2  # a read-only file reads fine


def test_the_suggested_nsys_command_is_shell_quoted(tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    d = tmp_path / "$(touch pwned);x"
    d.mkdir()
    rep = d / "a b;touch pwned2.nsys-rep"
    rep.write_bytes(b"not really a report")
    monkeypatch.setenv("PROFPLUG_NSYS", str(tmp_path / "no-nsys"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["report", str(rep)]) == 3
    line = one_error(capsys)
    cmd = line.split("or export it yourself: ", 1)[1]
    # then the pasted command is one nsys call whose arguments are the two paths, verbatim
    assert shlex.split(cmd) == ["nsys", "export", "--type", "sqlite", "--output",
                                str(rep.with_suffix(".sqlite")), str(rep)]
