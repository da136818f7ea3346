"""Issue #40 (robustness, round 4), items 1-4, 9, 18, 19, 21, 22, 24: outputs over inputs,
one file named twice, numbers out of range in run.json and ab.json, tampered and huge
ab.json. Bad input gives the right answer or one line and a non-zero exit; no file is lost.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from nsys_synth import NsysExport
from synth import one_error, sync_loop

from profplug.cli.main import main


def _run_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A ``profplug run`` folder: RUN/run.json and RUN/kineto/rank0.json."""
    run = tmp_path / "run"
    (run / "kineto").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"world_size": 1, "note": "keep me"}))
    return run, sync_loop(run / "kineto" / "rank0.json")


# ---------------------------------------------------------------- 1: run.json is an input
@pytest.mark.parametrize("cmd", [["report", "-f", "json", "-o"], ["whatif", "-o"],
                                 ["report", "--html"], ["whatif", "--html"]])
def test_output_over_run_json_refused(tmp_path: Path, capsys, cmd: list[str]) -> None:
    run, trace = _run_dir(tmp_path)
    before = (run / "run.json").read_bytes()
    for given in (run / "kineto", trace):  # the folder or the file: run.json one level up
        assert main([cmd[0], str(given), *cmd[1:], str(run / "run.json")]) == 2
        assert "run.json" in one_error(capsys)
    assert (run / "run.json").read_bytes() == before


def test_output_hard_linked_to_run_json_refused(tmp_path: Path, capsys) -> None:
    run, _ = _run_dir(tmp_path)
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


# ---------------------------------------------------------------- 2: Nsight twins
def _export(path: Path) -> Path:
    ex = NsysExport()
    p = ex.process()
    for k in range(5):
        p.launch(100.0 * k, 100.0 * k + 2, 50.0)
        p.runtime("cudaDeviceSynchronize", 100.0 * k + 3, 60.0)
    return ex.write(path)


@pytest.mark.parametrize("out", ["x.nsys-rep", "x.qdrep", "x.sqlite-wal", "x.sqlite-shm",
                                 "x.sqlite.gz"])
def test_output_over_an_nsight_twin_of_the_export_refused(tmp_path: Path, capsys,
                                                          out: str) -> None:
    db = _export(tmp_path / "x.sqlite")
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"the capture")
    os.utime(db, (rep.stat().st_mtime + 10,) * 2)  # the export is newer: used as is
    assert main(["report", str(db), "-o", str(tmp_path / out)]) == 2
    assert "read with the input" in one_error(capsys)
    assert rep.read_bytes() == b"the capture"


def test_output_over_the_export_of_a_report_refused(tmp_path: Path, capsys) -> None:
    db = _export(tmp_path / "x.sqlite")
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
    _export(tmp_path / "x.sqlite")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "y.sqlite-wal")]) == 2
    assert "inside the input directory" in one_error(capsys)


# ---------------------------------------------------------------- 4: two outputs, one file
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


# ---------------------------------------------------------------- 9: one file named twice
@pytest.mark.parametrize("how", ["dot", "dir and file", "symlink", "hard link"])
def test_one_trace_named_twice_is_one_rank(tmp_path: Path, capsys, how: str) -> None:
    d = tmp_path / "d"
    d.mkdir()
    f = sync_loop(d / "trace.json", rank=None)  # unranked: the file order would number it
    second = {"dot": str(d / "." / "trace.json"), "dir and file": str(d),
              "symlink": str(tmp_path / "l.json"), "hard link": str(tmp_path / "h.json")}[how]
    if how == "symlink":
        (tmp_path / "l.json").symlink_to(f)
    if how == "hard link":
        os.link(f, tmp_path / "h.json")
    first = str(d) if how == "dir and file" else str(f)
    argv = [first, second] if how != "dir and file" else [second, str(f)]
    assert main(["report", *argv, "-f", "json", "--no-whatif"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ranks"]) == 1


def test_a_report_and_its_export_named_are_one_rank(tmp_path: Path, capsys) -> None:
    db = _export(tmp_path / "x.sqlite")
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"the capture")
    os.utime(db, (rep.stat().st_mtime + 10,) * 2)
    assert main(["report", str(rep), str(tmp_path / "." / "x.sqlite"), "-f", "json",
                 "--no-whatif"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ranks"]) == 1


# ---------------------------------------------------------------- ab.json: 3, 19, 21, 24
def _ab_doc(rounds: int = 3) -> dict:
    from profplug.analyzers.render.registry import render_text
    from unit.analyzers.test_ab_analyze import analyze, make_runs

    return json.loads(render_text(analyze(make_runs(rounds=rounds), rounds=rounds), "json"))


def _ab_dir(tmp_path: Path, doc: dict) -> Path:
    out = tmp_path / "ab"
    out.mkdir()
    (out / "ab.json").write_text(json.dumps(doc))
    return out


def test_ab_report_keeps_unknown_top_level_fields(tmp_path: Path, capsys) -> None:
    doc = _ab_doc()
    doc["note"] = "rerun on node 7"
    doc["future_field"] = {"x": [1, 2]}
    out = _ab_dir(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 0
    again = json.loads((out / "ab.json").read_text())
    assert again["note"] == "rerun on node 7" and again["future_field"] == {"x": [1, 2]}
    assert again["verdict"] == doc["verdict"]  # a known field is the analysis', not kept


@pytest.mark.parametrize("whatif, where", [
    ({}, "whatif: object missing required field `run`"),
    ({"run": "r", "predicted_step_us": "fast", "recorded_step_us": 1.0},
     "whatif.predicted_step_us: expected `float`, got `str`"),
    ({"run": "r", "predicted_step_us": 10.0}, "object missing required field"),
])
def test_tampered_stored_whatif_is_one_line(tmp_path: Path, capsys, whatif: dict,
                                            where: str) -> None:
    doc = _ab_doc()
    doc["whatif"] = whatif
    out = _ab_dir(tmp_path, doc)
    before = (out / "ab.json").read_bytes()
    assert main(["ab-report", str(out)]) == 2
    assert where in one_error(capsys)
    assert (out / "ab.json").read_bytes() == before


@pytest.mark.parametrize("steps", [[5e-324] * 5, [3.6e9, 5e-324, 5e-324], [1e-308, 1.0]])
def test_subnormal_ab_step_times_are_one_line(tmp_path: Path, capsys, steps: list) -> None:
    doc = _ab_doc()
    doc["runs"][0]["ranks"][0]["step_us"] = steps
    out = _ab_dir(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 2
    assert "runs[0].ranks[0].step_us" in one_error(capsys)


def test_zero_step_ab_json_says_no_run_recorded_a_step(tmp_path: Path, capsys) -> None:
    doc = _ab_doc()
    for r in doc["runs"]:
        for k in r["ranks"]:
            k["step_us"] = []
            k["host_step_us"] = []
    out = _ab_dir(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 6
    err = capsys.readouterr().err
    assert "no run recorded a step" in err and "0 of" not in err


def test_ab_html_over_the_whatif_run_refused(tmp_path: Path, capsys) -> None:
    out = _ab_dir(tmp_path, _ab_doc())
    (tmp_path / "traced").mkdir()
    trace = sync_loop(tmp_path / "traced" / "rank0.json")
    before = trace.read_bytes()
    assert main(["ab-report", str(out), "--whatif", str(tmp_path / "traced"), "--html",
                 str(trace)]) == 2
    assert "rank0.json" in one_error(capsys)
    assert main(["ab-report", str(out), "--html", "-"]) == 2
    assert "two documents to stdout" in one_error(capsys)
    assert trace.read_bytes() == before


# ---------------------------------------------------------------- 18, 19: numbers
@pytest.mark.parametrize("value, says", [("9" * 401, "401-digit integer"),
                                         ("1e400", "not a finite number"),
                                         ("5e-324", "is not a step time"),
                                         ("1e300", "is not a step time")])
def test_run_json_step_time_out_of_range_is_one_line(tmp_path: Path, capsys, value: str,
                                                     says: str) -> None:
    run, _ = _run_dir(tmp_path)
    text = ('{"world_size": 1, "ranks": [{"rank": 0, "timing": {"step_us": [100.0, VALUE]}, '
            '"untraced": {"before": {"step_us": [90, 90, 90, 90, 90]}}}]}')
    (run / "run.json").write_text(text.replace("VALUE", value))
    for fmt in ("table", "json"):
        assert main(["report", str(run / "kineto"), "-f", fmt, "--no-whatif"]) == 2
        line = one_error(capsys)
        assert "run.json: ranks[0].timing.step_us[1]" in line and says in line
    assert main(["whatif", str(run / "kineto"), "--unprofiled", "auto", "-f", "json"]) == 2
    assert says in one_error(capsys)


@pytest.mark.parametrize("value", ["1e-308", "5e-324", "0.0001"])
def test_unprofiled_below_a_nanosecond_is_one_line(tmp_path: Path, capsys, value: str) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    assert main(["whatif", str(trace), "--unprofiled", value, "-f", "json"]) == 2
    assert "--unprofiled takes" in one_error(capsys)


def test_unprofiled_at_a_nanosecond_gives_finite_json(tmp_path: Path, capsys) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    assert main(["whatif", str(trace), "--unprofiled", "0.001", "-f", "json"]) == 0
    json.loads(capsys.readouterr().out)  # strict JSON: no Infinity


# ---------------------------------------------------------------- 22: a huge ab.json
def test_huge_ab_json_step_series_rewritten_compact_and_exact(tmp_path: Path) -> None:
    doc = _ab_doc()
    n = 0
    for r in doc["runs"]:
        for k in r["ranks"]:
            k["step_us"] = [round(100.0 + (i % 97) * 0.013, 3) for i in range(20_000)]
            n += 20_000
    out = _ab_dir(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 0
    text = (out / "ab.json").read_text()
    assert text.count("\n") < 5_000 < n  # a series on one line, not a line per step
    again = json.loads(text)
    assert [k["step_us"] for r in again["runs"] for k in r["ranks"]] == \
        [k["step_us"] for r in doc["runs"] for k in r["ranks"]]


def test_ab_json_writer_still_refuses_nan() -> None:
    from profplug.analyzers.commands.ab_report import ab_json_text
    from unit.analyzers.test_ab_analyze import analyze, make_runs

    res = analyze(make_runs(rounds=3), rounds=3)
    res.runs[0]["ranks"][0]["step_us"] = [1.0] * 20 + [float("nan")]
    with pytest.raises(ValueError, match="not JSON compliant"):
        ab_json_text(res)
