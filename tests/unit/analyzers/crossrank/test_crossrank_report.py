"""The cross-rank analysis in the report: rank JSON fields, run-level JSON, DataFrames,
table, HTML section and the CLI switch (synthetic 4-stage pipeline; times in us)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers import (
    analyze,
    bubbles_frame,
    critical_path_frame,
    cross_rank,
    cross_rank_analysis,
    ranks_frame,
)
from profplug.analyzers.crossrank.critical import CATEGORIES
from profplug.analyzers.render.registry import render_text
from synth import KinetoTrace
from synth.pipeline import PipelineSpec, write

from profplug.cli.main import main

SPEC = PipelineSpec(stages=4, steps=5, sync="device", slow_stage=2)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write(SPEC, tmp_path / "run")
    return tmp_path / "run"


def test_rank_json_gains_the_split_and_the_bubble(run_dir: Path) -> None:
    # given a report with the cross-rank analysis
    doc = analyze([run_dir], run=[cross_rank_analysis()]).to_dict()
    for r in doc["ranks"]:
        keys = list(r)
        # then the new fields follow idle_us, and add up
        assert keys[keys.index("idle_us") + 1:keys.index("idle_us") + 4] == [
            "comm_transfer_us", "comm_wait_us", "bubble_us"]
        assert r["comm_transfer_us"] + r["comm_wait_us"] == pytest.approx(r["comm_us"])
        assert r["bubble_us"] == pytest.approx(r["idle_us"] + r["comm_wait_us"])
        st = r["steps"]
        assert len(st["bubble_us"]) == len(st["step_numbers"]) == SPEC.steps
        for k in range(SPEC.steps):
            assert st["comm_transfer_us"][k] + st["comm_wait_us"][k] == \
                pytest.approx(st["comm_us"][k])
            assert st["bubble_us"][k] == pytest.approx(st["idle_us"][k] + st["comm_wait_us"][k])
    # and the run-level key holds the rest
    cr = doc["cross_rank"]
    assert cr["n_ranks"] == 4 and cr["matching"]["p2p_pairs"] == 4 * SPEC.steps
    cp = cr["critical_path"]
    assert set(cp["by_category"]) == set(CATEGORIES)
    assert sum(cp["by_category"].values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(cp["by_rank"].values()) == pytest.approx(1.0, abs=1e-3)
    assert cp["top_rank"] == 2 and len(cp["steps"]) == SPEC.steps
    assert [d["rank"] for d in cr["drain"]] == [0, 1, 2, 3]
    json.dumps(doc, allow_nan=False)


def test_without_the_analysis_the_rank_json_is_unchanged(run_dir: Path) -> None:
    doc = analyze([run_dir]).to_dict()
    assert "cross_rank" not in doc and "bubble_us" not in doc["ranks"][0]
    assert "bubble_us" not in doc["ranks"][0]["steps"]


def test_frames(run_dir: Path) -> None:
    rep = analyze([run_dir], run=[cross_rank_analysis()])
    rf = ranks_frame(rep)
    assert {"comm_transfer_us", "comm_wait_us", "bubble_us"} <= set(rf.columns)
    assert (rf["bubble_us"] - rf["idle_us"] - rf["comm_wait_us"]).abs().max() < 1e-6
    bf = bubbles_frame(rep)
    assert len(bf) == 4 * SPEC.steps and bf["bubble_us"].ge(0).all()
    assert {"host_lead_p50_us", "queue_depth_mean", "queue_empty_us"} <= set(bf.columns)
    cf = critical_path_frame(rep)
    assert len(cf) == SPEC.steps and (cf["top_rank"] == 2).all()
    assert cf[list(CATEGORIES)].sum(axis=1).round(3).eq(1.0).all()
    with pytest.raises(KeyError):
        bubbles_frame(analyze([run_dir]))


def test_table_and_html_section(run_dir: Path) -> None:
    rep = analyze([run_dir], run=[cross_rank_analysis()])
    text = render_text(rep, "table")
    assert "bubble = idle + NCCL peer wait" in text and "critical path over 5 step(s)" in text
    section = text[text.index("cross-rank ·"):]
    assert max(len(line) for line in section.splitlines()) <= 80
    page = render_text(rep, "html")
    assert page.count('<section class="crossrank"') == 1
    section = page[page.index('<section class="crossrank"'):]
    section = section[:section.index("</section>")]
    for kind in ("xr-swim", "xr-queue", "xr-lead"):  # inline SVG plots, no script
        assert f'<svg class="xr-plot {kind}"' in section, kind
    assert "Swimlane" in section and "<script" not in section
    # the what-if and the cross-rank section come right after the summary, in that order
    assert page.index('id="summary"') < page.index('<section class="crossrank"') \
        < page.index('id="timeline"')


def test_hostile_call_site_is_escaped(tmp_path: Path) -> None:
    evil = "<img src=x onerror=alert(1)>"
    t = KinetoTrace(rank=0)
    t.annotation("ProfilerStep#0", 0, 100)
    t.annotation(evil, 0, 50)
    t.launch(0, 5, 10)
    t.launch(1, 20, 10)
    t.write(tmp_path / "rank0.json")
    page = render_text(analyze([tmp_path], run=[cross_rank]), "html")  # forced: one rank
    section = page[page.index('<section class="crossrank"'):]
    assert evil not in section and "&lt;img src=x" in section


def test_cli_switch(run_dir: Path, tmp_path: Path) -> None:
    on, off = tmp_path / "on.json", tmp_path / "off.json"
    assert main(["report", str(run_dir), "-f", "json", "-o", str(on)]) == 0
    assert main(["report", str(run_dir), "--no-cross-rank", "-f", "json", "-o", str(off)]) == 0
    assert "cross_rank" in json.loads(on.read_text())
    assert "cross_rank" not in json.loads(off.read_text())


def test_ranks_without_gpu_work(tmp_path: Path) -> None:
    # given a rank that recorded host calls only (a CPU/gloo run)
    t = KinetoTrace(rank=0)
    t.annotation("ProfilerStep#0", 0, 100)
    t.runtime("cudaGetDevice", 1, 1)
    t.write(tmp_path / "rank0.json")
    rep = analyze([tmp_path], run=[cross_rank])  # forced (the report's skips it: one rank)
    # then every output still renders, and says why there is nothing
    res = rep.run["cross_rank"]
    assert res.bubbles == [] and res.swimlane is None
    assert any("without GPU work" in w for w in res.warnings)
    assert '<section class="crossrank"' in render_text(rep, "html")
    assert "cross-rank · 0 rank(s)" in render_text(rep, "table")
    json.dumps(rep.to_dict(), allow_nan=False)


def _rank(tmp_path: Path, rank: int, kernel: str) -> None:
    t = KinetoTrace(rank=rank)
    t.annotation("ProfilerStep#0", 0, 100)
    t.launch(0, 5, 10, name=kernel)
    t.launch(1, 20, 10)
    t.write(tmp_path / f"rank{rank}.json")


@pytest.mark.parametrize(("ranks", "kernel", "applies"), [
    (1, "ncclDevKernel_SendRecv(ncclDevComm*)", False),  # one rank: nothing to match
    (2, "gemm_kernel", False),  # two ranks, no NCCL kernel
    (2, "ncclDevKernel_SendRecv(ncclDevComm*)", True),
])
def test_skipped_where_it_cannot_apply(tmp_path: Path, ranks: int, kernel: str,
                                       applies: bool) -> None:
    # given a run of one rank, or of ranks without NCCL kernels
    for r in range(ranks):
        _rank(tmp_path, r, kernel)
    # when the report runs its cross-rank analysis
    rep = analyze([tmp_path], run=[cross_rank_analysis()])
    # then it is skipped (no key, no rank fields, no warning) unless there is a NCCL kernel
    # on two ranks or more
    assert ("cross_rank" in rep.run) is applies
    assert ("bubble_us" in rep.to_dict()["ranks"][0]) is applies
    assert rep.warnings == []
