"""Public traces nobody here wrote (tests/data/public_traces, README there: sources and
licences): given each run, when the default report runs (what-if and cross-rank included) in
every format, then exit 0, no traceback, the sum rule holds, and what can be known of the
trace independently (sync call counts from the raw JSON / SQLite) is what the report says."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from profplug.analyzers import analyze
from profplug.analyzers.commands.common import report_analyses
from synth import check_sums

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[1] / "data" / "public_traces"

# run folder -> (ranks, GPU work on rank 0, rank 0's sync calls by API: count, cross-rank).
# The counts are those of the raw traces (one event or row per call, none nested), except
# pipit/saxpy, where each call is two rows, one inside the other (test below).
FACTS: dict[str, tuple[list[int], bool, dict[str, int], bool]] = {
    "hta/amd_trace": ([0], True, {"hipDeviceSynchronize": 1}, False),
    "hta/cpu_only": ([34], False, {}, False),
    "hta/critical_path/alexnet": ([0], True, {"cudaStreamSynchronize": 16,
                                              "cudaDeviceSynchronize": 5,
                                              "cudaStreamWaitEvent": 34}, False),
    "hta/critical_path/cuda_event_sync": ([0], True, {"cudaEventSynchronize": 1,
                                                      "cudaDeviceSynchronize": 1,
                                                      "cudaStreamSynchronize": 1}, False),
    "hta/critical_path/cuda_event_sync_multi_stream": (
        [0], True, {"cudaDeviceSynchronize": 1, "cudaStreamWaitEvent": 1}, False),
    "hta/cupti_profiler": ([0], False, {"cudaStreamSynchronize": 16, "cudaDeviceSynchronize": 5,
                                        "cudaMemcpy": 1, "cudaStreamWaitEvent": 34}, False),
    "hta/negative_queue_length_values_check": (
        [0], True, {"cudaStreamSynchronize": 75, "cudaDeviceSynchronize": 1,
                    "cudaStreamWaitEvent": 425}, False),
    "hta/trace_compare/base": ([1], True, {"cudaDeviceSynchronize": 1}, False),
    "hta/trace_file_list": ([1], True, {}, False),
    "hta/trace_filter": ([0, 1], True, {}, True),  # two ranks with NCCL kernels
    "hta/triton_example": ([0], True, {"cudaDeviceSynchronize": 1}, False),
    "kineto/tb_plugin/test": ([0], True, {"cudaStreamSynchronize": 2,
                                          "cudaDeviceSynchronize": 1}, False),
    "pipit/cloverleaf-nsys": ([0], True, {"cudaDeviceSynchronize": 1312, "cudaMemcpy": 279},
                              False),
    "pipit/saxpy": ([0], True, {"cudaMemcpy": 15}, False),
}


def test_every_run_has_its_facts() -> None:
    runs = {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob("*.gz")}
    assert runs == set(FACTS)
    assert sum(p.stat().st_size for p in ROOT.rglob("*.gz")) < 3_000_000


@pytest.fixture(params=sorted(FACTS))
def run(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """A copy of one run's folder (whatever a reader might write stays out of the tree)."""
    dst = tmp_path / "run"
    shutil.copytree(ROOT / request.param, dst)
    return request.param, dst


def test_the_default_report(run: tuple[str, Path], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    name, path = run
    ranks, gpu, syncs, cross = FACTS[name]
    # when the default report runs, in every format
    for fmt in ("table", "json", "csv"):
        out = tmp_path / f"report.{fmt}"
        extra = ["--html", str(tmp_path / "report.html")] if fmt == "json" else []
        rc = main(["report", str(path), "-f", fmt, "-o", str(out), *extra])
        err = capsys.readouterr().err
        # then exit 0 and no traceback
        assert rc == 0, err
        assert "Traceback" not in err + out.read_text()
    assert "<html" in (tmp_path / "report.html").read_text()
    doc = json.loads((tmp_path / "report.json").read_text())
    # the facts
    assert [r["rank"] for r in doc["ranks"]] == ranks
    assert doc["ranks"][0]["has_gpu_work"] is gpu
    assert {s["api"]: s["count"] for s in doc["ranks"][0]["syncs"]} == syncs
    assert ("cross_rank" in doc) is cross
    # the what-if is there, or one warning line says why not (it failed); without GPU work
    # the host-only summary stands in its place, and nothing is replayed
    if not gpu:
        assert "whatif" not in doc and "host_only" in doc
    elif "whatif" not in doc:
        assert sum(w.startswith("what-if") for w in doc["warnings"]) == 1


def test_the_sum_rule(run: tuple[str, Path]) -> None:
    check_sums(analyze([run[1]], run=report_analyses(None), jobs=1))


def test_calls_recorded_twice_one_inside_the_other_count_once(tmp_path: Path) -> None:
    # given an Nsight export where each runtime call is two rows, cudaMemcpy holding
    # cudaMemcpy_v3020 (same thread, same correlation id)
    path = ROOT / "pipit/saxpy/saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz"
    db = tmp_path / "saxpy.sqlite"
    db.write_bytes(gzip.decompress(path.read_bytes()))
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT s.value, count(*), sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaMemcpy%' GROUP BY 1"
    ).fetchall()
    con.close()
    by_name = {n: (c, ns) for n, c, ns in rows}
    assert by_name["cudaMemcpy"][0] == by_name["cudaMemcpy_v3020"][0] == 15
    # when reported, then 15 calls, blocked for the outer calls' time only
    r = analyze([path]).rank(0)
    (s,) = r.syncs
    assert (s.api, s.count) == ("cudaMemcpy", 15)
    assert s.host_blocked_us == round(by_name["cudaMemcpy"][1] / 1000, 3)
