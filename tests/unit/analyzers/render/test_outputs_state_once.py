"""Each output says a thing once and where it belongs: one headline per report, the
``--against`` results on the ``--html`` page too, ab-report's verdicts before its table, and
one count of stream waits per rank (the calls, as the sync table counts them)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[4]
DEVICE = ROOT / "sample_traces/pp2_infer_kineto/device"
EVENT = ROOT / "sample_traces/pp2_infer_kineto/event"
AB = ROOT / "sample_traces/ab_h200_decode_loop"

pytestmark = [pytest.mark.skipif(not DEVICE.is_dir(), reason="no sample traces here"),
              pytest.mark.samples_read_once]  # the commands these tests run


def test_a_report_prints_its_headline_once(tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    assert main(["report", str(DEVICE), "-o", str(out)]) == 0
    text = " ".join(out.read_text().split())
    assert text.count("Measured: device-wide synchronizes") == 1
    assert text.count("Predicted with event-based waits") == 1


def test_stream_waits_are_the_calls_the_sync_table_counts(tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    assert main(["report", str(DEVICE), "-o", str(out)]) == 0
    text = out.read_text()
    said = [int(n) for n in re.findall(r"^stream waits: (\d+) calls", text, re.M)]
    table = [int(n) for n in re.findall(r"^cudaStreamWaitEvent\s+stream_wait\s+(\d+)", text,
                                        re.M)]
    assert said == table == [160, 160]


def test_the_against_results_are_on_the_page(tmp_path: Path) -> None:
    page = tmp_path / "w.html"
    assert main(["whatif", str(DEVICE), "--against", str(EVENT), "--html", str(page), "-o",
                 str(tmp_path / "w.txt")]) == 0
    html = page.read_text()
    assert '<section class="against">' in html and "Against event (measured)" in html
    assert "the band for a separate traced run, which inside judges" in html


def test_ab_report_leads_with_its_verdicts(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ab"
    out.mkdir()
    shutil.copy(AB / "ab.json", out / "ab.json")
    assert main(["ab-report", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.index("verdict: event: 1.08x faster") < text.index("policy      ok")
