"""Golden outputs: every JSON, CSV and table output of ``report``, ``compare`` and ``whatif``
on every sample run (``sample_traces/**/run.json``) is byte-identical to the stored one.

The goldens under ``tests/golden/`` were written by the code before the architecture refactor
and pin its behaviour. One thing varies from run to run and is normalised, nothing else: the
what-if replay's wall time (``"replay_s": <float>`` in JSON and ``events replayed in <s> s``
in the what-if table, both written as 0). Every other byte is compared as written (a
compare's JSON included: its key order is the code's, the same in every process, as
test_compare.py checks across hash seeds). Two outputs are not stored because
they equal another byte for byte (``SAME_AS``): ``report --whatif -f json`` is ``report.json``
and ``whatif -f json`` is ``report.json``'s ``whatif`` key; the test asserts both.

Regenerate (only when a change of output is intended, and say so in the commit):
``PROFPLUG_GOLDEN_UPDATE=1 .venv/bin/python -m pytest tests/integration/test_golden_outputs.py``
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("PROFPLUG_GOLDEN_UPDATE") == "1"

RUNS = sorted(p.parent.relative_to(ROOT).as_posix() for p in SAMPLES.rglob("run.json"))
# compare: each device run against its sibling event run, and the one Kineto/Nsight pair
PAIRS = [(r, r[: -len("device")] + "event") for r in RUNS
         if r.endswith("/device") and r[: -len("device")] + "event" in RUNS]
PAIRS.append(("sample_traces/h200_three_waits/kineto", "sample_traces/h200_three_waits/nsys"))

# output file name -> command-line arguments after the run's path
REPORT_OUTPUTS = {
    "report.json": ["report", "{run}", "-f", "json"],
    "report.csv": ["report", "{run}", "-f", "csv"],
    "report.txt": ["report", "{run}", "-f", "table"],
    "whatif_all_sync.json": ["whatif", "{run}", "--drop", "all-sync", "-f", "json"],
    "whatif.txt": ["whatif", "{run}", "-f", "table"],
}
COMPARE_OUTPUTS = {
    "json": ["compare", "{a}", "{b}", "-f", "json"],
    "txt": ["compare", "{a}", "{b}", "-f", "table"],
}

_REPLAY_S_JSON = re.compile(r'"replay_s": [0-9.eE+-]+')
_REPLAY_S_TABLE = re.compile(r"events replayed in [0-9.]+ s")


def normalise(text: str) -> str:
    """Zero the what-if replay's wall time (the one field that varies between runs)."""
    text = _REPLAY_S_JSON.sub('"replay_s": 0', text)
    return _REPLAY_S_TABLE.sub("events replayed in 0 s", text)


def _output(args: list[str], out: Path) -> str:
    assert main([*args, "-o", str(out)]) == 0
    return normalise(out.read_text())


def _check(text: str, golden: Path) -> None:
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        return
    assert golden.is_file(), f"{golden} missing: run with PROFPLUG_GOLDEN_UPDATE=1"
    assert text == golden.read_text(), f"output differs from {golden.relative_to(ROOT)}"


# Outputs equal to a golden above, so not stored twice: (name, arguments, what it equals).
# ``report --whatif`` is the default report (every sample is small enough for the default
# what-if); ``whatif -f json`` is the report's ``whatif`` key (``{"step": ..., "whatif": ...}``).
SAME_AS = [
    ("report_whatif.json", ["report", "{run}", "--whatif", "-f", "json"], "report.json"),
    ("whatif.json", ["whatif", "{run}", "-f", "json"], 'report.json["whatif"]'),
]


def _whatif_key(report_json: str) -> str:
    """The ``whatif`` key of a JSON report, written as ``whatif -f json`` writes it (its
    ``step`` and ``predicted_step`` also at the top: ``runstep``)."""
    w = json.loads(report_json)["whatif"]
    doc = {"step": w["step"], "predicted_step": w["predicted_step"], "whatif": w}
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


@pytest.mark.parametrize("run", RUNS)
def test_report_and_whatif_outputs_match_goldens(run: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # paths in the outputs are relative to the repository
    texts = {}
    for name, args in REPORT_OUTPUTS.items():
        texts[name] = _output([a.format(run=run) for a in args], tmp_path / name)
        _check(texts[name], GOLDEN / Path(run).relative_to("sample_traces") / name)
    report_whatif, whatif_json = (_output([a.format(run=run) for a in args], tmp_path / name)
                                  for name, args, _ in SAME_AS)
    assert report_whatif == texts["report.json"]
    assert whatif_json == _whatif_key(texts["report.json"])


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_compare_outputs_match_goldens(a: str, b: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    stem = Path(a).relative_to("sample_traces").parent.as_posix().replace("/", "__")
    for ext, args in COMPARE_OUTPUTS.items():
        text = _output([x.format(a=a, b=b) for x in args], tmp_path / f"compare.{ext}")
        _check(text, GOLDEN / "compare" / f"{stem}.{ext}")


def test_every_sample_run_is_covered() -> None:
    assert len(RUNS) >= 18 and len(PAIRS) >= 9
