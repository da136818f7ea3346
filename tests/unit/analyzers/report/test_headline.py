"""The headline: the run's finding in one sentence, in the JSON (``headline``), as the first
line of the table and at the top of the page; the run's warnings (no steps found) beside it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sample_cache
from profplug.analyzers import analyze
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.render.registry import render_text
from profplug.analyzers.whatif import whatif_analysis
from sample_cache import sample_run_dirs
from synth import KinetoTrace, write_run

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ROOT = Path(__file__).resolve().parents[4]
SITE = "recv_from_prev_pipeline_rank_ > sync.device"


def test_with_the_whatif_it_leads_with_the_measured_idle_then_the_prediction(
        tmp_path: Path) -> None:
    # given the synthetic device run: 100 us GPU period per step, a 30 us device-sync gap
    # in each step (the syncs sit in the recv: the policy drops them), and the replay
    # without them: the 50 us compute kernels back to back, each step 50 us shorter
    rep = analyze(write_run(tmp_path, "device"), run=[whatif_analysis()])
    band = rep.run["whatif"].rank(0).run_band_pct
    # then the finding says what was measured first (30 us/step, 30% of the 100 us step),
    # then the prediction with its band for a separate run, then where to measure it
    assert rep.headline() == (
        f"Measured: device-wide synchronizes in the pipeline send/recv left rank 0's GPU "
        f"idle 30 us/step (30% of its median step of 100 us) at {SITE}. Predicted with "
        f"event-based waits: 50 us/step on rank 0, the slowest (2.00x the run's step; "
        f"+-{band:.0f}% for a separate traced run); "
        "`profplug ab` measures it without a profiler.")


def test_the_finding_withholds_the_prediction_when_peer_ranks_are_missing(
        tmp_path: Path) -> None:
    # given one rank of the two-rank decode sample: its NCCL kernels' peer is not there
    run = ROOT / "sample_traces" / "pp2_infer_kineto" / "device"
    rank0 = sorted(p for p in (run / "kineto").iterdir() if "rank0" in p.name or
                   p.name.endswith("0.json.gz"))[:1]
    rep = analyze(rank0, run=[whatif_analysis()])
    # then the measured idle is given, the prediction is not
    assert rep.headline().startswith("Measured: ")
    assert "Prediction withheld: peer ranks missing" in rep.headline()
    assert "Predicted with" not in rep.headline()


def test_without_the_whatif_it_states_the_direct_cost_and_how_to_get_the_rest(
        tmp_path: Path) -> None:
    rep = analyze(write_run(tmp_path, "device"))
    assert rep.headline() == (
        f"Device-wide synchronizes cost rank 0 30 us/step directly (30% of its step) at "
        f"{SITE}; run `profplug whatif` (or `report --whatif`) for the indirect cost.")


def test_without_device_syncs_it_says_what_the_idle_is(tmp_path: Path) -> None:
    rep = analyze(write_run(tmp_path, "event"), run=[whatif_analysis()])
    assert rep.headline() == (
        "No device-wide synchronizes on any rank; rank 0's GPU is idle 10% of its window, "
        "mostly host-bound launch gaps: 10 us/step (12% of its step).")


def test_without_gpu_work_it_says_so(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.runtime("cudaDeviceSynchronize", 0, 5)
    rep = analyze(t.write(tmp_path / "r0.json"))
    assert rep.headline().startswith("No GPU work in these traces")


@pytest.mark.parametrize("run", [str(p) for p in sample_run_dirs()])
def test_every_sample_has_a_one_sentence_finding_with_numbers(run: str) -> None:
    # the headline of the run's default report (with the what-if), made once per session
    h = sample_cache.report(run).headline()
    assert h.endswith(".") and h.count(". ") <= 1 and re.search(r"\d[\d,]* us", h)
    if "/device" in run and "pp2_infer" in run:  # the decode loop: ~1.5x from the syncs
        assert re.match(r"Measured: device-wide synchronizes in the pipeline send/recv left "
                        r"rank \d's GPU idle [\d,]+ us/step \([\d.]+% of its median step of "
                        r"[\d,]+ us\) at ", h)
        assert re.search(r"Predicted with event-based waits: [\d,]+ us/step on rank \d, the "
                         r"slowest \(1\.[4-9]\dx the run's step; [+]-\d+% for a separate "
                         r"traced run", h)
        assert h.endswith("`profplug ab` measures it without a profiler.")
    if "/event" in run:
        assert "nothing to drop, so no speedup is predicted" in h or "No device-wide" in h


def test_cli_outputs_carry_it_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, "device")
    # the report runs the what-if by default (cheap), so the headline has the indirect cost
    assert main(["report", str(run), "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert list(doc)[:3] == ["version", "headline", "step"] and "whatif" in doc
    assert "warnings" in doc
    assert "Predicted with event-based waits: 50 us/step" in doc["headline"]
    assert main(["report", str(run)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("Measured: device-wide synchronizes in the pipeline send/recv "
                            "left rank 0's GPU\nidle 30 us/step")
    assert max(len(x) for x in table.splitlines()[:4]) <= 80
    # --no-whatif: the direct cost, and how to get the rest
    assert main(["report", str(run), "--no-whatif", "-f", "json", "-o",
                 str(tmp_path / "n.json")]) == 0
    doc = json.loads((tmp_path / "n.json").read_text())
    assert "whatif" not in doc and "run `profplug whatif`" in doc["headline"]


def test_no_steps_is_one_warning_line_with_the_remedies(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    # given a trace without any step range
    t = KinetoTrace(rank=0)
    t.launch(0, 0, 10)
    t.runtime("cudaDeviceSynchronize", 5, 7)
    t.launch(15, 16, 4)
    path = t.write(tmp_path / "rank0.json")
    want = ("no steps found on any rank (looked for ProfilerStep#N or profplug.step ranges), "
            "so times are per GPU window: name the range that marks a step with --step-range "
            "NAME or re:REGEX, mark steps at capture with `profplug run --step-fn "
            "MODULE:FUNCTION`, or wrap each step in `with profplug.step():`")
    # then the JSON, the table and the page each carry it once
    assert analyze(path).warnings == [want]
    assert main(["report", str(path), "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["warnings"] == [want]
    assert main(["report", str(path)]) == 0
    table = capsys.readouterr().out
    head = table.split("\n\n")[0]  # the headline, then the warning (wrapped to 80 columns)
    warning = head[head.index("\nwarning: ") + 1:]
    assert " ".join(x.strip() for x in warning.splitlines()) == f"warning: {want}"
    assert max(len(x) for x in head.splitlines()) <= 80
    page = render_text(analyze(path), "html")
    assert page.count("no steps found on any rank") == 1
    # an explicit rule that matches nothing is an error, not this warning (test_step_rule)
    with pytest.raises(ProfplugError, match="--step-range decode matches no range"):
        analyze(path, step_range="decode")


def test_whatif_failure_leaves_the_report(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # given a trace without GPU work, `report --whatif` used to drop the whole report
    t = KinetoTrace(rank=0)
    t.runtime("cudaDeviceSynchronize", 0, 5)
    path = t.write(tmp_path / "r0.json")
    assert main(["report", str(path), "--whatif", "-f", "json", "-o",
                 str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [r["rank"] for r in doc["ranks"]] == [0]
    assert doc["warnings"] == ["what-if: no GPU work in the given traces"]
    assert "what-if: no GPU work" in capsys.readouterr().err


def test_a_prediction_without_its_peers_says_so(tmp_path: Path) -> None:
    one = write_run(tmp_path, "device") / "rank1.json"
    h = analyze(one, run=[whatif_analysis()]).headline()
    assert "Prediction withheld: peer ranks missing" in h and "Predicted with" not in h


def test_a_zero_length_window_gives_a_sentence_not_an_error(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 1, 0)
    t.runtime("cudaDeviceSynchronize", 2, 3)
    rep = analyze(t.write(tmp_path / "r0.json"), run=[whatif_analysis()])
    assert rep.headline().endswith(".") and "nan" not in rep.headline()
