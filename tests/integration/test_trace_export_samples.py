"""The merged trace (``--trace-out``) of the real two-GPU samples (Kineto and Nsight) and of
the real Megatron-Core PP=2 client: the format's rules, the overlay's idle against the
report's, one arrow per matched pair, a predicted process per rank."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from profplug.analyzers.graph.matching import COLL_RULES, RULES
from profplug.analyzers.render.chrometrace.export import TraceAsk, render_trace
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.result import us
from trace_events import names, slices_of, violations

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ST = Path(__file__).resolve().parents[2] / "sample_traces"
MCORE = Path("/work/shared/traces/mcore_pp2_client")
RUNS = [ST / "pp2_infer_kineto/device", ST / "pp2_infer_nsys/device",
        ST / "pp2_megatron_kineto/device", ST / "pp2_megatron_nsys/event",
        MCORE / "device"]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_merged_trace_of_a_real_run(run: Path) -> None:
    if not run.is_dir():
        pytest.skip(f"{run} is not here")
    # given the report of a real run, as `profplug report --trace-out` makes it
    rep = analyze(run, run=report_analyses(None, True, None, True), keep_timelines=True,
                  jobs=1, progress=False)
    # when it is exported
    buf = io.StringIO()
    render_trace([("", rep)], buf, TraceAsk())
    doc: dict[str, Any] = json.loads(buf.getvalue())
    # then it keeps the Trace Event Format's rules
    assert violations(doc) == []
    # and each rank's overlay adds up to the report's idle by cause, exactly
    report = rep.to_dict()
    pid = {v: k for k, v in names(doc).items()}
    meta = doc["otherData"]["profplug"]["runs"][0]
    for rj, rm in zip(report["ranks"], meta["ranks"], strict=True):
        drawn = dict.fromkeys(CAUSES, 0)
        for e in slices_of(doc, "idle."):
            if e["pid"] == pid[f"rank {rj['rank']}"]:
                drawn[e["args"]["cause"]] += e["args"]["idle_ns"]
        assert {c: us(v) for c, v in drawn.items()} == rj["idle_by_cause_us"] \
            == rm["overlay_idle_by_cause_us"]
    # one arrow per matched pair (every kernel lies in the analyzed window)
    m = rep.run["cross_rank"].matched
    coll = np.isin(m.e_rule, [RULES.index(r) for r in COLL_RULES])
    pairs = int((m.e_dir == 1).sum() + ((m.e_dir == 0) & (m.e_pos < m.f_pos) & ~coll).sum())
    arrows = [e for e in doc["traceEvents"] if e["ph"] == "s"
              and e["name"] in ("send -> recv", "NCCL pair (direction unknown)")]
    assert len(arrows) == pairs > 0
    # the critical path drawn, and each rank's prediction beside it when the what-if ran
    assert slices_of(doc, "critical.")
    if "whatif" in rep.run:
        assert {f"rank {r.rank} (predicted" for r in rep.ranks} <= \
            {n.split(",")[0] for n in names(doc).values()}
