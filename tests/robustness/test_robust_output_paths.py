"""An output never lands on an input: a file the command reads (a trace, run.json beside a
run's traces, an Nsight export or a file Nsight keeps with it), one under an input directory
that the next command would read as a trace, or another output of the same command is
refused in one line before anything is written, however it is named (a link, ``.``); two
documents never share stdout (``-``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from synth import one_error, run_folder, sync_loop, sync_loop_export

from profplug.cli.main import main


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


@pytest.mark.parametrize("cmd", [["report", "-f", "json", "-o"], ["whatif", "-o"],
                                 ["report", "--html"], ["whatif", "--html"]])
def test_output_over_run_json_refused(tmp_path: Path, capsys, cmd: list[str]) -> None:
    run, trace = run_folder(tmp_path)
    before = (run / "run.json").read_bytes()
    for given in (run / "kineto", trace):  # the folder or the file: run.json one level up
        assert main([cmd[0], str(given), *cmd[1:], str(run / "run.json")]) == 2
        assert "run.json" in one_error(capsys)
    assert (run / "run.json").read_bytes() == before


def test_output_hard_linked_to_run_json_refused(tmp_path: Path, capsys) -> None:
    run, _ = run_folder(tmp_path)
    twin = tmp_path / "elsewhere.json"
    os.link(run / "run.json", twin)
    assert main(["report", str(run / "kineto"), "-f", "json", "-o", str(twin)]) == 2
    assert "run.json" in one_error(capsys)


def test_output_hard_linked_to_a_trace_in_an_input_directory_refused(tmp_path: Path,
                                                                      capsys) -> None:
    d = tmp_path / "d"
    d.mkdir()
    trace = sync_loop(d / "rank0.json")
    before = trace.read_bytes()
    twin = tmp_path / "out.txt"
    os.link(trace, twin)
    assert main(["report", str(d), "-o", str(twin)]) == 2
    assert "rank0.json" in one_error(capsys)
    assert trace.read_bytes() == before


@pytest.mark.parametrize("out", ["x.nsys-rep", "x.qdrep", "x.sqlite-wal", "x.sqlite-shm",
                                 "x.sqlite.gz"])
def test_output_over_an_nsight_twin_of_the_export_refused(tmp_path: Path, capsys,
                                                          out: str) -> None:
    db = sync_loop_export(tmp_path / "x.sqlite")
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"the capture")
    os.utime(db, (rep.stat().st_mtime + 10,) * 2)  # the export is newer: used as is
    assert main(["report", str(db), "-o", str(tmp_path / out)]) == 2
    assert "read with the input" in one_error(capsys)
    assert rep.read_bytes() == b"the capture"


def test_output_over_the_export_of_a_report_refused(tmp_path: Path, capsys) -> None:
    db = sync_loop_export(tmp_path / "x.sqlite")
    before = db.read_bytes()
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"the capture")
    os.utime(db, (rep.stat().st_mtime + 10,) * 2)
    for flag in ("-o", "--html"):
        assert main(["report", str(rep), flag, str(db)]) == 2
        assert "x.sqlite, read with the input" in one_error(capsys)
    assert db.read_bytes() == before


def test_output_over_a_sidecar_inside_an_input_directory_refused(tmp_path: Path,
                                                                  capsys) -> None:
    sync_loop_export(tmp_path / "x.sqlite")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "y.sqlite-wal")]) == 2
    assert "inside the input directory" in one_error(capsys)


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


def test_compare_output_over_a_run_is_refused(tmp_path: Path, capsys) -> None:
    a = sync_loop(tmp_path / "a.json")
    b = sync_loop(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "-o", str(b)]) == 2
    assert "is an input" in one_error(capsys)


def test_json_and_html_to_one_file_refused(tmp_path: Path, capsys) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    out = tmp_path / "out.txt"
    assert main(["report", str(trace), "-o", str(out), "--html",
                 str(tmp_path / "." / "out.txt")]) == 2
    assert "another output" in one_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("argv", [["-o", "-", "--html", "-"], ["--html", "-"]])
def test_two_documents_to_stdout_refused(tmp_path: Path, capsys, argv: list[str]) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    for cmd in ("report", "whatif"):
        assert main([cmd, str(trace), *argv]) == 2
        assert "two documents to stdout" in one_error(capsys)


def test_json_to_stdout_and_html_to_a_file_allowed(tmp_path: Path, capsys) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    assert main(["report", str(trace), "-f", "json", "-o", "-", "--html",
                 str(tmp_path / "r.html"), "--no-whatif"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"][0]["rank"] == 0
    assert (tmp_path / "r.html").read_text().startswith("<!")


def test_dash_writes_to_stdout(tmp_path: Path, capsys, monkeypatch) -> None:
    sync_loop(tmp_path / "rank0.json")
    monkeypatch.chdir(tmp_path)  # restored after the test (a bare chdir leaked into others)
    assert main(["report", str(tmp_path), "-f", "json", "-o", "-", "--no-whatif",
                 "--no-cross-rank"]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"][0]["rank"] == 0
    assert not (tmp_path / "-").exists()
