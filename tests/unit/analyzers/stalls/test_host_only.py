"""A run without GPU work (a CPU / gloo run) gets a short report that says so and shows what
there is: host step times, p2p calls, syncs issued; input warnings come before the finding;
notes are true of the traces in hand (no "one rank" for two ranks)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from profplug.analyzers.crossrank.analysis import cross_rank
from profplug.analyzers.graph.matching import CLOCK_SINGLE, match
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale.load import load_timelines
from synth import KinetoTrace

from profplug.cli.main import main

STEPS_US = (100.0, 110.0, 90.0, 100.0, 100.0, 400.0)  # the last one an outlier


def cpu_run(root: Path) -> Path:
    """Two ranks, 6 host steps each (STEPS_US), per step one profplug send (rank 0) or recv
    (rank 1) with its profplug.sync.device inside; no GPU op."""
    root.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        tr = KinetoTrace(rank=rank)
        t = 1000.0
        for i, d in enumerate(STEPS_US):
            tr.annotation(f"ProfilerStep#{i}", t, d)
            name = ("profplug.send_to_next_pipeline_rank peer=1" if rank == 0 else
                    "profplug.recv_from_prev_pipeline_rank_ peer=0")
            tr.annotation(name, t + 10, 30)
            tr.annotation("profplug.sync.device", t + 30, 5)
            t += d
        tr.write(root / f"rank{rank}.json")
    return root


def test_cpu_run_summary(tmp_path: Path) -> None:
    rep = analyze([cpu_run(tmp_path / "cpu")], run=report_analyses(None))
    res = rep.run["host_only"]
    # then per rank: 6 steps, median over the 5 non-outliers (90,100,100,100,110) = 100 us,
    # min 90, max 400 (step 5 the outlier), 6 p2p calls, 6 sync.device ranges
    for r in res.ranks:
        assert (r.n_steps, r.step_us, r.step_min_us, r.step_max_us, r.outlier_steps) == (
            6, 100.0, 90.0, 400.0, [5])
        assert r.syncs_issued == {"sync.device": 6}
    assert res.ranks[0].p2p_calls == {"send": 6, "recv": 0, "collective": 0}
    assert res.ranks[1].p2p_calls == {"send": 0, "recv": 6, "collective": 0}
    assert rep.to_dict()["host_only"]["statistic"] == "median"


def test_cpu_run_summary_without_the_other_run_level_analyses(tmp_path: Path) -> None:
    # given a run without GPU work, when the report has no what-if and no cross-rank
    # analysis (the timelines do not travel back with the per-rank results)
    run = cpu_run(tmp_path / "cpu")
    alone = analyze([run], run=report_analyses(False, cross_rank=False))
    # then the host-only summary is there all the same (the ranks read again for it)
    full = analyze([run], run=report_analyses(None))
    assert alone.to_dict()["host_only"] == full.to_dict()["host_only"]
    assert alone.run["host_only"].ranks[0].n_steps == 6


def test_cpu_run_page_is_short_and_says_so(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    run = cpu_run(tmp_path / "cpu")
    page = tmp_path / "r.html"
    assert main(["report", str(run), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("No GPU work in these traces")
    assert "  rank 0 (kineto): 6 steps, step 100.0 us (min 90.0, max 400.0)\n" in out
    assert "    p2p calls: send 6; syncs issued: sync.device 6\n" in out
    doc = page.read_text()
    # the page: the finding, the host side; no empty GPU tables
    assert 'id="host"' in doc and "No GPU work" in doc
    for gpu_only in ('id="summary"', 'id="callsites"', 'id="syncs"', 'id="timeline"'):
        assert gpu_only not in doc, gpu_only
    assert "one rank" not in doc


def test_truncated_trace_warns_before_the_finding(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # given a .json.gz cut in the middle
    src = cpu_run(tmp_path / "cpu") / "rank0.json"
    data = gzip.compress(src.read_bytes())
    bad = tmp_path / "cut" / "rank0.json.gz"
    bad.parent.mkdir()
    bad.write_bytes(data[: len(data) * 2 // 3])
    main(["report", str(bad)])
    out = capsys.readouterr().out
    # then the warning about the input comes before the finding
    first = out.splitlines()[0]
    assert first.startswith("warning: rank 0: "), out[:400]
    assert out.index("warning: rank 0: ") < out.index("No GPU work")


def test_notes_true_of_the_traces(tmp_path: Path) -> None:
    # a 2-rank run where one rank has GPU work: not "one rank", and no Nsight clock
    tls = load_timelines([cpu_run(tmp_path / "cpu")])
    gpu = KinetoTrace(rank=1)
    gpu.launch(10, 20, 50)
    gpu.write(tmp_path / "cpu" / "rank1.json")
    tls = load_timelines([tmp_path / "cpu"])
    assert match([t for t in tls if t.n_gpu]).clock_rule == CLOCK_SINGLE
    res = cross_rank(tls)
    assert any(n.startswith("2 ranks, 1 with GPU work: ") for n in res.notes), res.notes
    assert not any("Nsight" in m["rule"] if isinstance(m, dict) else False
                   for m in [res.matching["clock"]])
