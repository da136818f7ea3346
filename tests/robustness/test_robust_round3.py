"""Issue #27 (robustness, round 3): the items other than ab.json (test_robust_ab_json.py)
and clocks (test_robust_clocks.py). Every input is rebuilt here; bad input must give a
correct result or one line and a non-zero exit, in bounded time, writing nothing beside it.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nsys_synth import NsysExport
from profplug.analyzers.core import saferegex
from profplug.analyzers.core.timeline import TimelineBuilder
from profplug.analyzers.crossrank import cross_rank
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.readers.nsys.reader import read_nsys
from profplug.analyzers.render.html import meta_html
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.callsites import enclosing
from profplug.analyzers.stalls.rank import analyze_rank
from synth import KinetoTrace, one_error, sync_loop

from profplug.cli.main import main

US = 1000


# ---------------------------------------------------------------- 2: epoch-us decimals
def test_epoch_us_with_ns_decimals_are_exact(tmp_path: Path) -> None:
    # given older torch's epoch microseconds with nanosecond decimals (float64 is 0.25 us
    # apart there): two kernels exactly 1000.250 us apart, each 0.375 us long
    base = 1_764_000_000_000_000
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 0.375,
           "args": {"device": 0, "stream": 7}} for _ in range(2)]
    text = json.dumps({"traceEvents": ev}).replace('"dur"', '"ts": TS, "dur"')
    text = text.replace("TS", f"{base}.125", 1).replace("TS", f"{base + 1000}.375", 1)
    p = tmp_path / "rank0.json"
    p.write_text(text)
    tl = read_kineto(p)
    # then every nanosecond is kept
    assert tl.gpu_start_ns.tolist() == [base * 1000 + 125, (base + 1000) * 1000 + 375]
    assert int(tl.gpu_start_ns[1] - tl.gpu_start_ns[0]) == 1_000_250
    assert (tl.gpu_end_ns - tl.gpu_start_ns).tolist() == [375, 375]


# ---------------------------------------------------------------- 3: Nsight processes
def _process(ex: NsysExport, t0: float, vm: int = 0, pid: int = 4242) -> None:
    p = ex.process(pid=pid)
    p.vm = vm
    for k in range(12):
        p.launch(t0 + 100.0 * k, t0 + 100.0 * k + 2, 50.0)
        p.runtime("cudaDeviceSynchronize", t0 + 100.0 * k + 3, 60.0)


def test_one_pid_on_two_hosts_is_two_ranks(tmp_path: Path) -> None:
    # given one export holding two processes with pid 4242 on two VMs (globalPid top bits)
    ex = NsysExport()
    _process(ex, 0.0, vm=0)
    _process(ex, 5000.0, vm=1)
    tls = read_nsys(ex.write(tmp_path / "r.sqlite"))
    # then they are two ranks of 1,152 us each, not one of 6,152 us with phantom idle time
    assert len(tls) == 2
    for tl in tls:
        r = analyze_rank(tl)
        assert r.devices[0].gpu.window_us == 1150.0
        assert r.devices[0].idle_by_cause_us["host_bound"] == 0.0
        assert tl.metadata["pid"] == 4242


def test_a_null_global_pid_is_counted_not_a_rank(tmp_path: Path) -> None:
    import sqlite3

    ex = NsysExport()
    _process(ex, 0.0)
    db = ex.write(tmp_path / "r.sqlite")
    con = sqlite3.connect(db)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE rowid = 3")
    con.commit()
    con.close()
    (tl,) = read_nsys(db)
    assert tl.n_gpu == 11 and tl.skipped == {"no process (NULL globalPid)": 1}


def test_a_sync_whose_name_id_dangles_is_warned(tmp_path: Path) -> None:
    import sqlite3

    ex = NsysExport()
    _process(ex, 0.0)
    db = ex.write(tmp_path / "r.sqlite")
    con = sqlite3.connect(db)
    con.execute("DELETE FROM StringIds WHERE value LIKE 'cudaDeviceSynchronize%'")
    con.commit()
    con.close()
    (tl,) = read_nsys(db)
    (w,) = [w for w in tl.warnings if "StringIds" in w]
    assert w.startswith("12 host call(s) named by an id missing from StringIds")


def test_a_kineto_begin_end_sync_is_counted(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 2, 50)
    t.events += [{"ph": ph, "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
                  "tid": 1, "ts": ts} for ph, ts in (("B", 3.0), ("E", 60.0))]
    tl = read_kineto(t.write(tmp_path / "rank0.json"))
    assert tl.skipped == {"begin/end pair (ph B/E), not read": 1}


# ---------------------------------------------------------------- 4, 18: output paths
@pytest.mark.parametrize("how", ["-o", "--html"])
def test_output_over_the_input_is_refused(tmp_path: Path, capsys, how: str) -> None:
    p = sync_loop(tmp_path / "rank0.json")
    before = p.read_bytes()
    for cmd in (["report"], ["whatif"]):
        assert main([*cmd, str(p), how, str(p), "--jobs", "1"]) == 2
        assert "is an input" in one_error(capsys)
    link = tmp_path / "link.json"
    link.symlink_to(p)
    assert main(["report", str(p), how, str(link)]) == 2  # the same file through a link
    assert "is an input" in one_error(capsys)
    assert p.read_bytes() == before


def test_an_output_read_back_from_the_input_directory_is_refused(tmp_path: Path,
                                                                  capsys) -> None:
    sync_loop(tmp_path / "rank0.json")
    assert main(["report", str(tmp_path), "-f", "json", "-o",
                 str(tmp_path / "report.json")]) == 2
    assert "inside the input directory" in one_error(capsys)
    assert not (tmp_path / "report.json").exists()
    # an HTML page there is never read back: allowed
    assert main(["report", str(tmp_path), "--html", str(tmp_path / "r.html"),
                 "--no-whatif", "--no-cross-rank"]) == 0
    assert main(["report", str(tmp_path), "--no-whatif", "--no-cross-rank"]) == 0


def test_dash_writes_to_stdout(tmp_path: Path, capsys, monkeypatch) -> None:
    sync_loop(tmp_path / "rank0.json")
    monkeypatch.chdir(tmp_path)  # restored after the test (a bare chdir leaked into others)
    assert main(["report", str(tmp_path), "-f", "json", "-o", "-", "--no-whatif",
                 "--no-cross-rank"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"][0]["rank"] == 0
    assert not (tmp_path / "-").exists()


def test_compare_output_over_a_run_is_refused(tmp_path: Path, capsys) -> None:
    a = sync_loop(tmp_path / "a.json")
    b = sync_loop(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "-o", str(b)]) == 2
    assert "is an input" in one_error(capsys)


# ---------------------------------------------------------------- 6: pasted command
def test_the_suggested_nsys_command_is_shell_quoted(tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    d = tmp_path / "$(touch pwned);x"
    d.mkdir()
    rep = d / "a b;touch pwned2.nsys-rep"
    rep.write_bytes(b"not really a report")
    monkeypatch.setenv("PROFPLUG_NSYS", str(tmp_path / "no-nsys"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["report", str(rep)]) == 3
    line = one_error(capsys)
    cmd = line.split("or export it yourself: ", 1)[1]
    # then the pasted command is one nsys call whose arguments are the two paths, verbatim
    assert shlex.split(cmd) == ["nsys", "export", "--type", "sqlite", "--output",
                                str(rep.with_suffix(".sqlite")), str(rep)]


# ---------------------------------------------------------------- 9, 10: size, devices
def test_a_long_annotation_label_is_one_string_for_all_its_calls() -> None:
    b = TimelineBuilder()
    name = "x" * 100_000
    b.ann(0, 1000 * US, 1, name)
    for k in range(50):
        b.api((10 * k + 1) * US, (10 * k + 2) * US, 1, "cudaDeviceSynchronize", -1)
    tl = b.build(rank=0, source="kineto", files=["synthetic"])
    labels = enclosing(tl, tl.api_start_ns, tl.api_end_ns, tl.api_tid)
    assert labels[0] == name and all(x is labels[0] for x in labels)


class _Counted(np.ndarray):
    """An array that counts the elements every ufunc on it (or on slices of it) reads."""

    seen = 0

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Any:
        _Counted.seen += sum(x.size for x in inputs if isinstance(x, np.ndarray))
        plain = [x.view(np.ndarray) if isinstance(x, _Counted) else x for x in inputs]
        return getattr(ufunc, method)(*plain, **kw)


def _devices_work(n: int) -> int:
    b = TimelineBuilder()
    for k in range(n):  # each kernel on its own device
        b.gpu(10 * k * US, (10 * k + 5) * US, k, 7, 0, "k", -1)
        b.api((10 * k + 5) * US, (10 * k + 9) * US, 1, "cudaDeviceSynchronize", -1)
    tl = b.build(rank=0, source="kineto", files=["synthetic"])
    tl.gpu_device = tl.gpu_device.view(_Counted)
    _Counted.seen = 0
    r = analyze_rank(tl)
    assert len(r.devices) == n
    cross_rank([tl])
    return _Counted.seen


def test_work_per_device_is_linear_in_the_devices() -> None:
    # a mask per device read n elements n times (160k devices: killed at 120 s)
    small, big = _devices_work(200), _devices_work(800)
    assert big <= 5 * small, (small, big)


# ---------------------------------------------------------------- 12: regexes
def test_a_catastrophic_step_range_regex_is_bounded(tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    t = KinetoTrace(rank=0)
    t.annotation("a" * 34 + "b", 0, 100)
    t.launch(1, 2, 5)
    p = t.write(tmp_path / "rank0.json")
    # without RE2: Python's re in a child process under a budget, and a line saying so
    monkeypatch.setattr(saferegex, "_re2", None)
    monkeypatch.setattr(saferegex, "BUDGET_S", 1.0)
    monkeypatch.setattr(saferegex.search_all, "__defaults__", (1.0, saferegex._scan_re))
    assert main(["report", str(p), "--step-range", "re:(a+)+$", "--jobs", "1"]) == 2
    assert "took over 1 s (catastrophic backtracking?)" in one_error(capsys)
    # a regex that ends: the same steps with or without the budget
    assert saferegex.search_all(r"a{3}(b)", ["aaab", "ab"]) == [(0, "b")]


@pytest.mark.skipif(saferegex._re2 is None, reason="google-re2 not installed")
def test_with_re2_a_catastrophic_regex_is_linear() -> None:
    assert saferegex.search_all("(a+)+$", ["a" * 5000 + "b", "aa"]) == [(1, "aa")]
    names = ["decode_step 12", "step 3", "prefill", "decode_step x"]
    rx = r"decode_step (\d+)|step (\d+)"
    assert saferegex.search_all(rx, names) == saferegex._scan_re(rx, names)


# ---------------------------------------------------------------- 13: deep run.json
def test_a_deep_run_json_is_ignored_and_meta_tables_are_bounded(tmp_path: Path,
                                                                capsys) -> None:
    sync_loop(tmp_path / "rank0.json")
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(800):
        cur["x"] = {}
        cur = cur["x"]
    (tmp_path / "run.json").write_text(json.dumps({"command": ["python"], "deep": deep}))
    page = tmp_path.parent / "p.html"
    assert main(["report", str(tmp_path), "--html", str(page), "--no-whatif"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    html = meta_html({"deep": deep, "list": json.loads("[" * 900 + "]" * 900)})
    assert "(nested too deep to show)" in html


# ---------------------------------------------------------------- 15: CLI numbers
@pytest.mark.parametrize(("args", "says"), [
    (["--tolerance-us", "1e16"], "--tolerance-us must be a number >= 0 and at most 3.6e9"),
    (["--tolerance-us", "nan"], "--tolerance-us must be a number >= 0 and at most 3.6e9"),
])
def test_absurd_tolerances_are_one_line(tmp_path: Path, capsys, args: list[str],
                                        says: str) -> None:
    p = sync_loop(tmp_path / "rank0.json")
    assert main(["report", str(p), *args]) == 2
    assert says in one_error(capsys)


@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-5", "0"])
def test_absurd_unprofiled_step_times_are_one_line(tmp_path: Path, capsys, value: str) -> None:
    p = sync_loop(tmp_path / "rank0.json")
    for fmt in ("table", "json"):
        assert main(["whatif", str(p), "--unprofiled", value, "-f", fmt]) == 2
        line = one_error(capsys)
        assert "--unprofiled takes the measured unprofiled step time in us" in line
        assert "int64" not in line


# ---------------------------------------------------------------- 17: missing ranks
def test_entries_named_like_traces_that_are_skipped_are_said(tmp_path: Path, capsys) -> None:
    sync_loop(tmp_path / "rank0.json")
    os.mkfifo(tmp_path / "rank1.json")
    (tmp_path / "rank2.json").symlink_to(tmp_path / "gone.json")
    (tmp_path / "rank3.json").symlink_to("/dev/zero")
    tls = load_timelines([tmp_path], jobs=1, progress=False)
    (w,) = [w for w in tls[0].warnings if "skipped" in w]
    assert w.startswith("3 entries skipped (a rank may be missing): ")
    assert "rank1.json: a FIFO, not a trace file" in w
    assert "rank2.json: a dangling link, not a trace file" in w
    assert "rank3.json: a character device, not a trace file" in w
    assert main(["report", str(tmp_path), "--strict", "--no-whatif"]) == 1


def test_a_subdirectory_that_cannot_be_listed_is_said(tmp_path: Path, monkeypatch) -> None:
    # Path.rglob swallows the PermissionError on Python 3.11 (and root can list anything,
    # so the refusal is simulated)
    sync_loop(tmp_path / "rank0.json")
    locked = tmp_path / "rank1"
    locked.mkdir()
    scandir = os.scandir

    def refuse(path: Any = ".") -> Any:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(locked))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    tls = load_timelines([tmp_path], jobs=1, progress=False)
    assert any(f"{locked}: cannot list it (Permission denied)" in w for w in tls[0].warnings)


# ---------------------------------------------------------------- 18: messages
def test_out_of_memory_names_the_inputs(monkeypatch, capsys) -> None:
    import profplug.cli.main as cli

    def boom(**_: Any) -> None:
        raise MemoryError

    monkeypatch.setattr(cli, "app", boom)
    assert cli.main(["ab-report", "x"]) == 3
    assert "out of memory (the inputs need more" in capsys.readouterr().err


def test_epoch_us_with_an_exponent_are_exact(tmp_path: Path) -> None:
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 1.0,
           "args": {"device": 0, "stream": 7}} for _ in range(2)]
    text = json.dumps({"traceEvents": ev}).replace('"ts": 0', '"ts": 1.764000000000000125e15',
                                                   1).replace('"ts": 0',
                                                              '"ts": 1.764000000001000375e15')
    p = tmp_path / "rank0.json"
    p.write_text(text)
    tl = read_kineto(p)
    assert int(tl.gpu_start_ns[1] - tl.gpu_start_ns[0]) == 1_000_250


def test_wrapping_a_long_word_is_textwraps_result() -> None:
    import textwrap

    from profplug.analyzers.render.text import wrap

    for text in ("a b " + "x" * 1000 + " c dd", "hello " + "y" * 300 + " tail end" * 9,
                 "z" * 257, "short text only"):
        for kw in ({}, {"initial_indent": "warning: ", "subsequent_indent": "  "}):
            assert wrap(text, 80, **kw) == textwrap.wrap(text, 80, **kw)
    lines = wrap("x" * (1 << 20), 80)  # textwrap: quadratic in the word
    assert len(lines) == (1 << 20) // 80 + 1 and "".join(lines) == "x" * (1 << 20)


def test_absurdly_many_devices_are_one_line(tmp_path: Path, capsys) -> None:
    t = KinetoTrace(rank=0)
    for k in range(5000):
        t.gpu(10.0 * k, 5.0, device=k)
    p = t.write(tmp_path / "rank0.json")
    assert main(["report", str(p), "--jobs", "1"]) == 3
    assert "5,000 distinct GPU device ids on rank 0 (more than 4,096)" in one_error(capsys)
