"""`profplug report` from the command line: formats, exit codes, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from synth import mixed_trace

from profplug.cli.main import main


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profplug", *args], capture_output=True,
                          text=True, timeout=120)


def test_table_json_csv_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = mixed_trace().write(tmp_path / "rank0.json")
    assert main(["report", str(p), "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["version"] == 1
    r0 = doc["ranks"][0]
    assert r0["idle_by_cause_us"] == {"device_sync": 6.0, "event_sync": 3.0, "host_bound": 5.0,
                                      "other": 0.0}
    for key in ("rank", "source", "files", "window_us", "busy_us", "compute_us", "comm_us",
                "idle_us", "stream_wait_us", "syncs", "callsites"):
        assert key in r0
    assert main(["report", str(p), "-f", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert float(rows[0]["device_sync_us"]) == 6.0
    assert main(["report", str(p)]) == 0
    table = capsys.readouterr().out
    assert "device_sync 6.0" in table
    assert max(len(line) for line in table.splitlines()) <= 80


@pytest.mark.parametrize("content", [b"", b"not json at all", b'{"traceEvents": [',
                                     b"\x1f\x8b\x08\x00\x00broken"])
def test_bad_input_is_one_line_and_nonzero(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    res = cli("report", str(p))
    assert res.returncode == 3
    assert "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and str(p) in res.stderr


def test_missing_path_and_unknown_format(tmp_path: Path) -> None:
    res = cli("report", str(tmp_path / "nope.json"))
    assert res.returncode != 0 and "no such file" in res.stderr and "Traceback" not in res.stderr
    p = mixed_trace().write(tmp_path / "t.json")
    res = cli("report", str(p), "-f", "yaml")
    assert res.returncode == 2 and "unknown format" in res.stderr


def test_strict_fails_on_truncated_trace(tmp_path: Path) -> None:
    full = json.dumps(mixed_trace().to_dict(), indent=1).encode()
    p = tmp_path / "cut.json"
    p.write_bytes(full[: len(full) * 2 // 3])
    ok = cli("report", str(p))
    assert ok.returncode == 0 and "truncated at byte" in ok.stdout
    strict = cli("report", str(p), "--strict")
    assert strict.returncode == 1


def test_report_with_whatif_adds_the_json_key_and_html_section(tmp_path: Path) -> None:
    p = mixed_trace().write(tmp_path / "rank0.json")
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    assert main(["report", str(p), "--whatif", "-f", "json", "-o", str(out),
                 "--html", str(page)]) == 0
    doc = json.loads(out.read_text())
    (w,) = doc["whatif"]["ranks"]
    assert w["rank"] == 0 and w["predicted_us"] < w["recorded_us"]
    assert '<section class="whatif">' in page.read_text()


def test_cli_tolerance_default_is_the_library_default() -> None:
    # the CLI keeps its own copy so that `profplug --help` does not import the analyzer
    from profplug.analyzers.stalls.rank import StallOptions

    from profplug.cli.options import DEFAULT_TOLERANCE_US

    assert StallOptions.from_tolerance_us(DEFAULT_TOLERANCE_US) == StallOptions()
