"""The merged, annotated trace (``render.chrometrace``, ``--trace-out``): the Trace Event
Format's rules, the overlay's idle against the report's, the processes, tracks and arrows,
on synthetic traces with known answers (Kineto and Nsight)."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers.commands.output import write_trace
from profplug.analyzers.core.timeline import KIND_NAMES
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.readers.registry import KinetoReader
from profplug.analyzers.render.chrometrace.export import TraceAsk, render_trace
from profplug.analyzers.render.chrometrace.overlay import RESERVED, cname
from profplug.analyzers.report.analysis import Report, analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.result import us
from profplug.analyzers.whatif import DropSpec, whatif
from synth import mixed_trace, nsys_ring, planted_trace, sync_loop_export, two_ranks, write_run
from synth.pipeline import PipelineSpec, write
from trace_events import load, names, slices_of, violations

from profplug.cli.main import main


def _report(paths: Any, **kw: Any) -> Report:
    """The report as ``profplug report --trace-out`` makes it (one process)."""
    return analyze(paths, run=report_analyses(kw.pop("whatif", None), True, None, True),
                   keep_timelines=True, jobs=1, **kw)


def _export(rep: Report, ask: TraceAsk | None = None, label: str = "") -> dict[str, Any]:
    buf = io.StringIO()
    render_trace([(label, rep)], buf, ask or TraceAsk())
    return json.loads(buf.getvalue())


def _overlay_ns(doc: dict[str, Any], pid: int) -> dict[str, int]:
    """Idle ns per cause drawn on a process's idle tracks, from the slices' own args."""
    out = dict.fromkeys(CAUSES, 0)
    for e in slices_of(doc, "idle."):
        if e["pid"] == pid:
            out[e["args"]["cause"]] += e["args"]["idle_ns"]
    return out


def test_each_idle_gap_is_a_slice_named_by_cause_and_call_site(tmp_path: Path) -> None:
    # given one rank with one gap of each host cause (device_sync 6 us, host_bound 5,
    # event_sync 3)
    rep = _report(mixed_trace().write(tmp_path / "rank0.json"))
    # when it is exported
    doc = _export(rep)
    # then the file keeps the format's rules, and each gap is one slice with its idle
    assert violations(doc) == []
    gaps = sorted((e["args"]["cause"], e["args"]["idle_ns"], e["name"])
                  for e in slices_of(doc, "idle."))
    assert gaps == [("device_sync", 6000, "device_sync @ profplug.recv_from_prev_pipeline_rank_"
                     " > profplug.sync.device"),
                    ("event_sync", 3000, "event_sync @ cudaStreamSynchronize"),
                    ("host_bound", 5000, "host_bound")]
    # the overlay adds up to the report's numbers, exactly, and says so in its metadata
    r0 = doc["otherData"]["profplug"]["runs"][0]["ranks"][0]
    assert r0["overlay_idle_by_cause_us"] == r0["idle_by_cause_us"] == \
        {"device_sync": 6.0, "event_sync": 3.0, "host_bound": 5.0, "other": 0.0}
    assert {c: us(v) for c, v in _overlay_ns(doc, 1).items()} == \
        rep.ranks[0].idle_by_cause_us()


def test_slices_carry_the_pages_colour_and_the_nearest_reserved_name(tmp_path: Path) -> None:
    doc = _export(_report(mixed_trace().write(tmp_path / "rank0.json")))
    for e in slices_of(doc, "idle."):
        assert e["cname"] in RESERVED
        assert e["cname"] == cname(e["args"]["cause"])
    colors = doc["otherData"]["profplug"]["colors"]
    assert colors["device_sync"] == {"hex": "#e45756", "cname": "rail_animation"}
    assert colors["other"]["cname"] in ("heap_dump_stack_frame", "generic_work")  # a grey


def test_two_ranks_are_two_processes_with_the_predicted_beside(tmp_path: Path) -> None:
    # given a send on rank 0 and its recv on rank 1, each step ending in a device-wide sync
    rep = _report(two_ranks(tmp_path), whatif=True)
    doc = _export(rep)
    assert violations(doc) == []
    assert names(doc) == {1: "rank 0", 2: "rank 0 (predicted, no device-wide syncs)",
                          3: "rank 1", 4: "rank 1 (predicted, no device-wide syncs)"}
    # the kernels the trace does not say the direction of: one arrow per pair, 0 to 1
    flows = [e for e in doc["traceEvents"] if e["ph"] in "sf" and e["name"].startswith("NCCL")]
    assert sorted((e["ph"], e["pid"]) for e in flows) == [("f", 3)] * 2 + [("s", 1)] * 2
    # the predicted process draws the replay's own times: each GPU op as the what-if kept it
    pred = rep.run["whatif"].predicted[1]
    ops = sorted(e["ts"] for e in doc["traceEvents"] if e["pid"] == 4 and e.get("cat") in
                 KIND_NAMES)
    run = doc["otherData"]["profplug"]["runs"][0]
    off = round(run["clock"]["offsets_us"]["1"] * 1000)
    assert ops == sorted(round((t + off - run["origin_ns"]) / 1000, 3)
                         for t in pred.gpu_start_ns.tolist())
    # its host calls only in the full file (they double its size)
    assert not [e for e in doc["traceEvents"] if e["pid"] == 4 and e.get("cat") == "cuda_runtime"]
    full = _export(rep, TraceAsk(full=True))
    calls = [e for e in full["traceEvents"] if e["pid"] == 4 and e.get("cat") == "cuda_runtime"]
    assert len(calls) == pred.api_start_ns.size > 0


def test_each_matched_send_recv_and_collective_is_an_arrow(tmp_path: Path) -> None:
    # given 2 stages of 2 tensor-parallel ranks (rank = stage * 2 + t): sends to the same t
    # of the next stage (the last stage's back to the first), an all-reduce per stage
    files, _ = write(PipelineSpec(stages=2, tp=2, steps=3), tmp_path / "traces")
    rep = _report(files)
    doc = _export(rep)
    assert violations(doc) == []
    pid = {v: k for k, v in names(doc).items()}
    rank_of = {pid[f"rank {r}"]: r for r in range(4)}
    arrows: dict[str, list[tuple[int, int]]] = {}
    ends = {(e["id"], e["ph"]): rank_of[e["pid"]] for e in doc["traceEvents"]
            if e["ph"] in "sf"}
    for e in doc["traceEvents"]:
        if e["ph"] == "s":
            arrows.setdefault(e["name"], []).append((ends[(e["id"], "s")],
                                                     ends[(e["id"], "f")]))
    # then every send -> recv goes to the same t of the other stage, as many as matched
    m = rep.run["cross_rank"].matched
    assert len(arrows["send -> recv"]) == int((m.e_dir == 1).sum()) > 0
    assert {(a % 2, b % 2) for a, b in arrows["send -> recv"]} <= {(0, 0), (1, 1)}
    assert all(a // 2 != b // 2 for a, b in arrows["send -> recv"])
    # and each all-reduce joins the two ranks of one stage
    assert arrows["collective"] and set(arrows["collective"]) == {(0, 1), (2, 3)}


def test_the_critical_path_is_drawn_with_its_hops_across_ranks(tmp_path: Path) -> None:
    rep = _report(two_ranks(tmp_path))
    doc = _export(rep)
    path = slices_of(doc, "critical.")
    assert path and {e["pid"] for e in path} == {1, 3}
    # its length per category is the cross-rank analysis's
    xr = rep.run["cross_rank"]
    drawn = sum(round(e["dur"] * 1000) for e in path)
    assert drawn == sum(s.end - s.start for p in xr.paths for s in p.segments)
    hops = [e for e in doc["traceEvents"] if e["ph"] == "s" and e["name"] == "critical path"]
    assert hops  # the path passes from one rank to the other
    assert violations(doc) == []


def test_keeping_the_predicted_timelines_changes_no_figure(tmp_path: Path) -> None:
    tls = load_timelines(two_ranks(tmp_path), jobs=1, progress=False)
    plain = whatif(tls, DropSpec("device-sync"))
    kept = whatif(tls, DropSpec("device-sync"), keep_predicted=True)
    assert plain.predicted is None and sorted(kept.predicted) == [0, 1]
    kept.replay_s = plain.replay_s
    assert kept.to_dict() == plain.to_dict()


def test_steps_and_outlier_steps_are_marked(tmp_path: Path) -> None:
    # given 9 steps of 100 us, the one at index 4 5,000 us longer (an outlier)
    rep = _report(planted_trace().write(tmp_path / "rank0.json"))
    doc = _export(rep)
    steps = sorted((e["args"]["step"], e["name"], e["args"]["outlier"])
                   for e in slices_of(doc, "step") if e["pid"] == 1)
    assert len(steps) == len(rep.ranks[0].step_starts_ns)
    assert [s for s in steps if s[2]] == [(4, "step 4 (outlier)", True)]
    assert violations(doc) == []


def test_trace_steps_keeps_n_steps_on_every_rank(tmp_path: Path) -> None:
    rep = _report(write_run(tmp_path, "device", n_steps=8))
    doc = _export(rep, TraceAsk(steps=2))
    meta = doc["otherData"]["profplug"]["runs"][0]
    assert meta["steps_drawn"] == [1, 2]
    for pid in (1, 3):
        drawn = [e["args"]["step"] for e in slices_of(doc, "step") if e["pid"] == pid]
        assert sorted(drawn) == [1, 2]
    assert any("only the steps drawn" in n for n in meta["notes"])
    assert violations(doc) == []


def test_full_trace_keeps_host_events_outside_the_gpu_window(tmp_path: Path) -> None:
    t = mixed_trace()
    t.annotation("setup_before_the_window", -500, 100)
    rep = _report(t.write(tmp_path / "rank0.json"))
    windowed = _export(rep)
    full = _export(rep, TraceAsk(full=True))
    find = [e for e in full["traceEvents"] if e.get("name") == "setup_before_the_window"]
    assert len(find) == 1 and find[0]["ts"] == -500.0  # before the first GPU op: negative
    assert violations(full) == []
    assert not [e for e in windowed["traceEvents"] if e.get("name") == "setup_before_the_window"]


def test_nsight_input_exports_with_the_same_rules(tmp_path: Path) -> None:
    # given an Nsight export of 5 steps: a 50 us kernel, then a device-wide synchronize
    rep = _report(sync_loop_export(tmp_path / "loop.sqlite"), read=ReadOptions())
    doc = _export(rep)
    assert violations(doc) == []
    r0 = doc["otherData"]["profplug"]["runs"][0]["ranks"][0]
    assert r0["overlay_idle_by_cause_us"] == r0["idle_by_cause_us"]
    assert sum(_overlay_ns(doc, 1).values()) == 4 * 50_000  # 4 gaps of 50 us
    assert len([e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["pid"] == 1]) == 5


def test_nsight_ring_of_three_ranks_has_one_arrow_per_send(tmp_path: Path) -> None:
    # given one Nsight export of three processes: a ring 0 -> 1 -> 2 -> 0, one send each
    rep = _report(nsys_ring(tmp_path / "ring.sqlite", profplug_names=True, compute=True))
    doc = _export(rep)
    assert violations(doc) == []
    rank_of = {pid: int(n.split()[-1]) for pid, n in names(doc).items() if "predicted" not in n}
    ends = {(e["id"], e["ph"]): rank_of[e["pid"]] for e in doc["traceEvents"]
            if e["ph"] in "sf" and e["name"] == "send -> recv"}
    arrows = sorted((ends[(i, "s")], ends[(i, "f")]) for i, ph in ends if ph == "s")
    # then each send is one arrow from its rank to the next
    assert arrows == [(0, 1), (1, 2), (2, 0)]
    assert doc["otherData"]["profplug"]["runs"][0]["clock"]["rule"].startswith("one clock")


def test_profplugs_kineto_reader_reads_the_merged_file(tmp_path: Path) -> None:
    # given the merged trace of a two-rank run
    rep = _report(write_run(tmp_path, "device"))
    path = tmp_path / "out" / "merged.json"
    path.parent.mkdir()
    buf = io.StringIO()
    render_trace([("", rep)], buf, TraceAsk())
    path.write_text(buf.getvalue())
    doc = load(path)
    # when profplug's own Kineto reader reads it (as one trace: the ranks' pids are
    # processes of one file)
    tl, = KinetoReader().read(path, 0, ReadOptions())
    # then it reads every GPU op, API call and annotation the file holds
    count = {k: sum(1 for e in doc["traceEvents"] if e.get("cat") == k)
             for k in (*KIND_NAMES, "cuda_runtime", "user_annotation")}
    assert tl.n_gpu == sum(count[k] for k in KIND_NAMES) > 0
    assert tl.api_start_ns.size == count["cuda_runtime"]
    assert tl.ann_start_ns.size == count["user_annotation"]
    # each process's correlation ids are its own: launches pair with their GPU ops
    assert not [w for w in tl.warnings if "correlation" in w]


def test_holistic_trace_analysis_loads_the_merged_file(tmp_path: Path) -> None:
    hta = pytest.importorskip("hta.trace_analysis")
    rep = _report(write_run(tmp_path, "device"))
    d = tmp_path / "hta"
    d.mkdir()
    buf = io.StringIO()
    render_trace([("", rep)], buf, TraceAsk())
    (d / "rank-0.json").write_text(buf.getvalue())
    analyzer = hta.TraceAnalysis(trace_dir=str(d))
    # it reads every kernel, and pairs each with its launch by correlation id (unique in
    # the file: each process's own ids)
    df = analyzer.t.get_trace(0)
    kernel = analyzer.t.symbol_table.sym_index["kernel"]
    doc = load(d / "rank-0.json")
    assert int((df["cat"] == kernel).sum()) == \
        sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel") > 0
    kernels = df[df["cat"] == kernel]
    assert bool((kernels["index_correlation"] >= 0).all())


def test_report_with_trace_out_writes_gzip_and_leaves_the_report_unchanged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, "device")
    assert main(["report", str(run), "-f", "json", "-q"]) == 0
    plain = json.loads(capsys.readouterr().out)
    out = tmp_path / "merged.json.gz"
    assert main(["report", str(run), "-f", "json", "-q", "--trace-out", str(out)]) == 0
    traced = json.loads(capsys.readouterr().out)
    for doc in (plain, traced):
        doc["whatif"].pop("replay_s")  # wall time
    assert traced == plain
    doc = load(out)
    assert violations(doc) == []
    assert doc["otherData"]["profplug"]["command"] == \
        f"profplug report {run} -f json -q --trace-out {out}"


def test_gzip_is_written_by_the_standard_library_without_isal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "isal", None)  # `from isal import igzip` fails
    rep = _report(mixed_trace().write(tmp_path / "rank0.json"))
    out = tmp_path / "merged.json.gz"
    write_trace([("", rep)], out, TraceAsk())
    assert gzip.decompress(out.read_bytes())[:1] == b"{"
    assert violations(load(out)) == []


def test_compare_draws_both_runs_as_process_groups(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = write_run(tmp_path, "device"), write_run(tmp_path, "event")
    out = tmp_path / "both.json"
    assert main(["compare", str(a), str(b), "-q", "--trace-out", str(out)]) == 0
    doc = load(out)
    assert violations(doc) == []
    procs = set(names(doc).values())
    assert {"device: rank 0", "device: rank 1", "event: rank 0", "event: rank 1"} <= procs


def test_whatif_draws_the_predicted_timeline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, "device")
    out = tmp_path / "w.json"
    assert main(["whatif", str(run), "-q", "--trace-out", str(out)]) == 0
    procs = set(names(load(out)).values())
    assert "rank 1 (predicted, event waits)" in procs


def test_trace_out_to_stdout_is_one_line_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, "device")
    assert main(["report", str(run), "-q", "--trace-out", "-"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--trace-out" in err[0]


def test_the_rule_checker_finds_broken_files() -> None:
    # a B without its E, a flow with one end, a thread without a name, two of profplug's
    # slices that overlap on one thread
    doc = {"traceEvents": [
        {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "p"}},
        {"ph": "B", "pid": 1, "tid": 2, "name": "open", "ts": 1.0},
        {"ph": "s", "pid": 1, "tid": 2, "name": "a", "cat": "c", "id": 7, "ts": 1.0},
        {"ph": "X", "pid": 1, "tid": 3, "name": "x", "ts": 1.0001, "dur": 1.0},
        {"ph": "X", "pid": 1, "tid": 4, "name": "y", "cat": "step", "ts": 1.0, "dur": 2.0},
        {"ph": "X", "pid": 1, "tid": 4, "name": "z", "cat": "step", "ts": 2.0, "dur": 2.0}]}
    found = violations(doc)
    assert any("overlaps another" in v for v in found)
    assert any("B without their E" in v for v in found)
    assert any("flow 7" in v for v in found)
    assert any("no thread_name" in v for v in found)
    assert any("us ts" in v for v in found)  # 4 decimals: finer than the ns
