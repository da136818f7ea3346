"""Trace oddities that gave wrong numbers with exit 0: Nsight NVTX step ranges are
range-checked as Kineto's events are; a Kineto GPU op whose ``device`` / ``stream`` is a
string keeps its correlation, one whose correlation is no integer is skipped with the
reason; launches sharing correlation ids are refused (all) or warned of (some); a GPU clock
hours early is refused, and one early on most ops is said.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from profplug.analyzers.readers.kineto.decode import BAD_CORRELATION
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.readers.nsys.reader import ABSURD, OUT_OF_RANGE, read_nsys
from synth import KinetoTrace, NsysExport

from profplug.cli.main import main

I64_MAX = 2**63 - 1


def _nsys_steps(path: Path, bad: tuple[int, int] | None) -> Path:
    ex = NsysExport()
    p = ex.process()
    for k in range(4):
        p.annotation("profplug.step", 100.0 * k, 90.0)
        p.launch(100.0 * k + 1, 100.0 * k + 5, 50.0)
    if bad is not None:  # one more profplug.step range with raw ns times
        ex.rows["NVTX_EVENTS"].append(
            (bad[0], bad[1], 59, None, None, None, "profplug.step", (4242 << 24) | 1, None,
             None, 0, None, None, None, None, None, None, None, None))
    ex.write(path)
    return path


@pytest.mark.parametrize(("bad", "reason"), [
    ((50_000, I64_MAX), OUT_OF_RANGE),          # ends at 2^63-1
    ((-(2**63), I64_MAX), OUT_OF_RANGE),        # spans the whole int64 range
    ((0, 10 * 3600 * 10**9), ABSURD),           # a 10-hour range swallowing the others
    ((300_000, 100_000), ABSURD)])              # ends before it starts
def test_an_absurd_nvtx_step_is_skipped_and_counted_not_a_step(
        tmp_path: Path, bad: tuple[int, int], reason: str) -> None:
    (tl,) = read_nsys(_nsys_steps(tmp_path / "r.sqlite", bad), workers=1)
    durs = (tl.step_end_ns - tl.step_start_ns).tolist()
    assert durs == [90_000] * 4
    assert tl.skipped.get(reason) == 1


def test_sane_nvtx_steps_skip_nothing(tmp_path: Path) -> None:
    (tl,) = read_nsys(_nsys_steps(tmp_path / "r.sqlite", None), workers=1)
    assert len(tl.step_start_ns) == 4
    assert not tl.skipped.get(ABSURD) and not tl.skipped.get(OUT_OF_RANGE)


def _kineto_launches(path: Path, field: str | None, value: object) -> Path:
    t = KinetoTrace()
    for k in range(5):
        t.annotation(f"ProfilerStep#{k}", 100.0 * k, 100.0)
        t.launch(100.0 * k + 1, 100.0 * k + 5, 60.0)
    if field is not None:
        for e in t.events:
            if e["cat"] == "kernel":
                e["args"][field] = value
    return t.write(path)


@pytest.mark.parametrize(("field", "value"), [("device", "0"), ("stream", "7"),
                                              ("correlation", None)])
def test_a_kernel_with_integer_args_as_strings_keeps_its_correlation(
        tmp_path: Path, field: str, value: object) -> None:
    ref = read_kineto(_kineto_launches(tmp_path / "a.json", None, None))
    if value is None:  # the correlation itself as a string
        t = json.loads((tmp_path / "a.json").read_text())
        for e in t["traceEvents"]:
            if e["cat"] == "kernel":
                e["args"]["correlation"] = str(e["args"]["correlation"])
        (tmp_path / "b.json").write_text(json.dumps(t))
    else:
        _kineto_launches(tmp_path / "b.json", field, value)
    tl = read_kineto(tmp_path / "b.json")
    assert tl.gpu_corr.tolist() == ref.gpu_corr.tolist() and (tl.gpu_corr > 0).all()
    assert tl.gpu_device.tolist() == ref.gpu_device.tolist()
    assert tl.gpu_stream.tolist() == ref.gpu_stream.tolist()
    assert not tl.skipped


def test_a_kernel_whose_correlation_is_not_an_integer_is_skipped_with_a_reason(
        tmp_path: Path) -> None:
    tl = read_kineto(_kineto_launches(tmp_path / "b.json", "correlation", "x12"))
    assert tl.gpu_start_ns.size == 0
    assert tl.skipped == {BAD_CORRELATION: 5}


def _steps_trace(kernel_shift_us: float = 0.0, one_corr: bool = False,
                 graph: bool = False, broken: int = 5) -> KinetoTrace:
    """5 steps of one 60 us kernel; the first ``broken`` of them with the oddity."""
    t = KinetoTrace()
    for k in range(5):
        t.annotation(f"ProfilerStep#{k}", 100.0 * k, 100.0)
        if graph:  # one graph launch, three kernels: legitimately one correlation id
            c = t.runtime("cudaGraphLaunch", 100.0 * k + 1, 2.0)
            for j in range(3):
                t.gpu(100.0 * k + 5 + 20 * j + kernel_shift_us, 15.0, corr=c)
            continue
        shift = kernel_shift_us if k < broken else 0.0
        c = t.launch(100.0 * k + 1, 100.0 * k + 5 + shift, 60.0)
        if one_corr and k < broken:
            for e in t.events:
                if isinstance(e.get("args"), dict) and e["args"].get("correlation") == c:
                    e["args"]["correlation"] = 7
    return t


def _report_warnings(path: Path) -> list[str]:
    from profplug.analyzers.report.analysis import analyze

    rep = analyze([path], jobs=1)
    return [w for r in rep.ranks for w in r.warnings]


def test_launches_and_kernels_all_sharing_one_correlation_id_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # given every launch and kernel of 5 steps on one correlation id (1 step of 460 us
    # reported before)
    path = _steps_trace(one_corr=True).write(tmp_path / "a.json")
    # then no figure is made of it: one line, exit 3
    assert main(["report", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "5 of 5 kernel launches share their correlation id" in err[0]


def test_some_launches_sharing_a_correlation_id_warn_once(tmp_path: Path) -> None:
    said = [w for w in _report_warnings(_steps_trace(one_corr=True, broken=2)
                                        .write(tmp_path / "a.json"))
            if "correlation ids reused" in w]
    assert len(said) == 1
    assert "2 host calls share their correlation id" in said[0]
    assert "1 kernel launches correlate to more than one GPU op (2 ops)" in said[0]


def test_a_gpu_clock_two_hours_early_is_refused(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _steps_trace(kernel_shift_us=-2 * 3600e6).write(tmp_path / "a.json")
    assert main(["report", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "5 of 5 GPU ops start before the call" in err[0]
    assert "7,200.000 s early" in err[0] and "clocks of this trace disagree" in err[0]


def test_a_gpu_clock_early_on_most_ops_says_the_clocks_disagree(tmp_path: Path) -> None:
    path = _steps_trace(kernel_shift_us=-2 * 3600e6, broken=3).write(tmp_path / "a.json")
    said = [w for w in _report_warnings(path) if "clocks disagree" in w]
    assert len(said) == 1 and "3 of 5 GPU ops start before the call" in said[0]
    assert "7,200,000.0 ms early" in said[0]


@pytest.mark.parametrize("graph", [False, True])
def test_sane_launches_and_graph_launches_raise_no_correlation_warning(
        tmp_path: Path, graph: bool) -> None:
    ws = _report_warnings(_steps_trace(graph=graph).write(tmp_path / "a.json"))
    assert not [w for w in ws if "correlation ids" in w or "clocks disagree" in w]
