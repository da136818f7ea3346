"""Nsight rows with absurd durations are skipped and counted; bad UTF-8 names never stop a read."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from profplug.analyzers.readers.nsys.reader import ABSURD, read_nsys
from synth import NsysExport

HOUR_US = 3_600_000_000.0


def export(tmp: Path) -> Path:
    ex = NsysExport()
    p = ex.process()
    p.launch(0, 0, 10)
    p.launch(20, 30, 5)
    p.gpu(50, 2 * HOUR_US)  # CUPTI timestamp garbage: 2 hours
    p.gpu(60, -5)  # ends before it starts
    p.runtime("cudaDeviceSynchronize", 40, -1)
    return ex.write(tmp / "report.sqlite")


def test_absurd_rows_skipped_and_counted(tmp_path: Path) -> None:
    (tl,) = read_nsys(export(tmp_path))
    assert tl.skipped == {ABSURD: 3}
    assert tl.n_gpu == 2 and tl.api_start_ns.size == 2
    assert tl.gpu_end_ns.max() == 35_000  # ns: the 30-35 us kernel is the last kept


def test_bad_utf8_name_is_replaced_not_fatal(tmp_path: Path) -> None:
    db = export(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE value = 'gemm_kernel'",
                 (b"gemm_\xff\xfekernel",))
    conn.commit()
    conn.close()
    (tl,) = read_nsys(db)
    assert tl.n_gpu == 2 and "gemm_\ufffd\ufffdkernel" in tl.names


def test_count_in_json_report(tmp_path: Path) -> None:
    db = export(tmp_path)
    res = subprocess.run([sys.executable, "-m", "profplug", "report", str(db), "-f", "json"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["ranks"][0]["skipped"] == {ABSURD: 3}
