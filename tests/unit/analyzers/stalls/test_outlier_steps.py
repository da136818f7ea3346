"""One planted long step, and idle between groups of steps: the per-step figures are the
median over the non-outlier steps, the outliers are listed (what took the time, where), and
the finding line does not move (times in us, answers by hand).

The trace: ``synth.planted_trace``, ``N`` steps of ``P`` = 100 us as in compare's device run
(compute 50 us at t+2, NCCL 20 us at t+52, a ``cudaDeviceSynchronize`` [t+5, t+75] inside
the recv from rank 1, so each step has a 30 us device_sync gap, t+72 .. t+102). Step
``LONG`` is planted: its synchronize waits 5,000 us longer, so its period is 5,100 us and
its gap 5,030 us.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers import analyze
from profplug.analyzers.render.registry import render_text
from profplug.analyzers.whatif import whatif_analysis
from synth import (
    PLANTED_AT,
    PLANTED_PERIOD,
    PLANTED_STALL,
    PLANTED_STEPS,
    KinetoTrace,
    planted_step,
    planted_trace,
)

N, P, LONG, STALL = PLANTED_STEPS, PLANTED_PERIOD, PLANTED_AT, PLANTED_STALL
SITE = "recv_from_prev_pipeline_rank_ > sync.device"


def trace(tmp: Path, planted: bool) -> Path:
    d = tmp / ("planted" if planted else "plain")
    d.mkdir()
    planted_trace(planted=planted).write(d / "rank0.json")
    return d


def test_the_median_basis_leaves_the_planted_step_out(tmp_path: Path) -> None:
    # given the trace with the planted step, when analyzed
    rank = analyze(trace(tmp_path, True)).rank(0)
    s = rank.steps
    assert s is not None
    # then the series is every step but the last; step 4 is the outlier
    assert s.period_us_per_step == [P] * LONG + [P + STALL] + [P] * (N - 2 - LONG)
    assert s.outlier_steps == [LONG]
    assert (s.statistic, s.period_us) == ("median", P)
    assert s.period_us_mean == pytest.approx((P * (N - 1) + STALL) / (N - 1))
    assert s.idle_per_step_us["device_sync"] == 30.0  # the mean would be 30 + 5000 / 9
    assert s.idle_per_step_us_mean["device_sync"] == pytest.approx((30.0 * 8 + STALL) / N)
    # the recv's call site: its idle per step is the median step's too
    (site,) = rank.callsites
    assert (site.idle_per_step_us, site.idle_caused_us) == (30.0, 30.0 * 8 + STALL)


def test_the_outlier_is_listed_with_what_took_the_time(tmp_path: Path) -> None:
    rep = analyze(trace(tmp_path, True))
    (o,) = rep.rank(0).steps.outliers
    assert o == {"step": LONG, "step_us": P + STALL,
                 "dominant": f"5,030 us of it GPU idle in device-wide synchronizes, most in "
                             f"{SITE}, waiting on rank 1",
                 "dominant_cause": "device_sync", "dominant_us": 30.0 + STALL,
                 "callsite": SITE, "peer": 1}
    # in the JSON, the table and the page: reported, not dropped
    doc = json.loads(render_text(rep, "json"))
    assert doc["ranks"][0]["steps"]["outliers"] == [o]
    assert doc["ranks"][0]["steps"]["statistic"] == "median"
    table = " ".join(render_text(rep, "table").split())  # wrapped at 80 columns
    assert f"outlier step {LONG}: 5,100.0 us, 5,030 us of it GPU idle" in table
    assert "100.0 us/step on the GPU, median over 7 steps" in table
    page = render_text(rep, "html")
    assert '<table class="sortable" id="outliers">' in page and "waiting on rank 1" in page


def test_the_finding_line_is_unchanged_by_the_outlier(tmp_path: Path) -> None:
    plain = analyze(trace(tmp_path, False), run=[whatif_analysis()])
    planted = analyze(trace(tmp_path, True), run=[whatif_analysis()])
    assert planted.headline() == plain.headline()
    assert plain.headline().startswith("Measured: device-wide synchronizes in the pipeline "
                                       "send/recv")
    w0, w1 = plain.run["whatif"].rank(0), planted.run["whatif"].rank(0)
    assert (w1.recorded_us, w1.direct_us) == (w0.recorded_us, w0.direct_us) == (P, 30.0)
    assert w1.predicted_us == w0.predicted_us and w1.saving_us == w0.saving_us
    assert plain.rank(0).steps.outliers == []
    # without the what-if, the direct cost: the median step's 30 us
    (tmp_path / "no_whatif").mkdir()
    assert analyze(trace(tmp_path / "no_whatif", True)).headline().startswith(
        "Device-wide synchronizes cost rank 0 30 us/step directly (30% of its step)")


GROUPS, PER_GROUP, IDLE = 40, 5, 20_000.0


def test_idle_between_groups_of_steps_is_not_step_time(tmp_path: Path) -> None:
    # given 40 groups of 5 steps, tiled back to back with 20 ms of idle between groups (a
    # server between requests)
    tr = KinetoTrace(rank=0)
    k = 0
    for g in range(GROUPS):
        t0 = 1000.0 + g * (PER_GROUP * P + IDLE)
        for j in range(PER_GROUP):
            planted_step(tr, k, t0 + j * P)
            k += 1
    d = tmp_path / "tiled"
    d.mkdir()
    tr.write(d / "rank0.json")
    rep = analyze(d, run=[whatif_analysis()])
    s = rep.rank(0).steps
    assert s is not None and s.n_steps == GROUPS * PER_GROUP
    # then the step is the steps' own period, not window / steps
    assert s.period_us == P
    assert s.idle_per_step_us == {"device_sync": 30.0, "event_sync": 0.0, "host_bound": 0.0,
                                  "other": 0.0}
    # the last step of each group but the last holds the idle: listed as outliers
    assert [o["step"] for o in s.outliers] == [PER_GROUP * g + PER_GROUP - 1
                                              for g in range(GROUPS - 1)]
    assert {o["step_us"] for o in s.outliers} == {P + IDLE}
    window_per_step = rep.rank(0).total("window_us") / s.n_steps
    assert window_per_step > 39 * P and s.period_us_mean > 39 * P  # what a mean would say
    w = rep.run["whatif"].rank(0)
    assert (w.recorded_us, w.direct_us) == (P, 30.0)  # the what-if reads the same step


def test_a_host_stall_names_where_the_host_was(tmp_path: Path) -> None:
    # given step 4 where the host spends 5,000 us in "load_batch" before the step's work
    # (the recv's sync ends with the NCCL kernel: its gap, t+72 .. t+5102, is host-bound)
    tr = KinetoTrace(rank=0)
    t = 1000.0
    for k in range(N):
        if k == LONG:
            tr.annotation(f"ProfilerStep#{k}", t, P + STALL)
            tr.launch(at=t + 1, start=t + 2, dur=50)
            tr.launch(at=t + 3, start=t + 52, dur=20, name="ncclDevKernel_SendRecv(x)",
                      stream=9)
            tr.annotation("load_batch", t + 80, STALL)
            tr.runtime("cudaEventQuery", t + 81, 1)  # the host is recorded, not blocked
            t += P + STALL
            continue
        planted_step(tr, k, t)
        t += P
    d = tmp_path / "host"
    d.mkdir()
    tr.write(d / "rank0.json")
    (o,) = analyze(d).rank(0).steps.outliers
    # the gap from the NCCL kernel's end (t+72) to the next step's first op (t+5102)
    assert (o["step"], o["dominant_cause"], o["dominant_us"]) == (LONG, "host_bound", 5030.0)
    assert o["callsite"] == "load_batch" and o["peer"] is None
    assert o["dominant"] == ("5,030 us of it GPU idle waiting for launches (host-bound), the "
                             "host in load_batch")
