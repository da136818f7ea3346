"""compare questions what it is given, before the answer: the same run
twice is an A/A; an A without a device-wide synchronize in its send/recv has a what-if that
predicts nothing. Both on the shipped pp2 Kineto samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

SAMPLES = Path(__file__).resolve().parents[4] / "sample_traces"
DEV, EVT = SAMPLES / "pp2_infer_kineto" / "device", SAMPLES / "pp2_infer_kineto" / "event"
AB = SAMPLES / "ab_h200_decode_loop"


def _out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["compare", *map(str, args)]) == 0
    return capsys.readouterr().out


def test_compare_of_a_run_with_itself_says_same_run_before_the_answer(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _out(capsys, DEV, DEV)
    flat = " ".join(out.split())
    assert "are the same run (the same traces, by content)" in flat
    assert flat.index("same run (the same") < flat.index("what-if predicted")
    assert "(same run: an A/A" in flat


def test_compare_of_an_event_run_says_its_whatif_predicts_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_out(capsys, EVT, DEV, "--format", "json"))
    line = "has no device-wide synchronize in its send/recv: its what-if predicts nothing"
    assert any(line in m for m in doc["mismatches"])
    assert doc["answer"] is None  # nothing to drop: no prediction to hold against B
    assert not any("same run" in m for m in doc["mismatches"])


def test_a_device_run_against_an_event_run_has_no_such_warning(
        capsys: pytest.CaptureFixture[str]) -> None:
    flat = " ".join(_out(capsys, DEV, EVT).split())
    assert "same run" not in flat and "predicts nothing" not in flat


def test_compare_event_run_against_ab_says_there_is_nothing_to_drop(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(EVT), str(AB)]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "nothing to drop, no prediction to set against ab" in err
