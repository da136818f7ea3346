"""Every command takes a run's paths the same way (``f1,f2``), and a path that is not a
trace run says which command or option reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synth import write_run

from profplug.cli.main import main


def json_of(tmp_path: Path, argv: list[str]) -> dict:
    out = tmp_path / "out.json"
    assert main([*argv, "-f", "json", "-o", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("command", ["report", "whatif"])
def test_comma_joined_files_are_one_run_as_in_compare(tmp_path: Path, command: str) -> None:
    run = write_run(tmp_path, "device")
    joined = f"{run / 'rank0.json'},{run / 'rank1.json'}"
    extra = ["--no-cross-rank", "--no-whatif"] if command == "report" else []
    by_dir = json_of(tmp_path, [command, str(run), *extra])
    by_files = json_of(tmp_path, [command, joined, *extra])
    ranks = by_files["ranks"] if command == "report" else by_files["whatif"]["ranks"]
    assert len(ranks) == 2
    for doc in (by_dir, by_files):  # the same run either way, but for its file list and
        for r in doc.get("ranks", []):  # the replay's wall time
            r.pop("files", None)
        doc.get("whatif", {}).pop("replay_s", None)
    assert by_files == by_dir


@pytest.mark.parametrize("command", ["report", "whatif"])
def test_a_comma_joined_path_with_a_missing_part_names_that_part(
        tmp_path: Path, capsys, command: str) -> None:
    run = write_run(tmp_path, "device")
    assert main([command, f"{run / 'rank0.json'},{run / 'rank9.json'}"]) == 3
    assert "rank9.json: no such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["report", "AB"], ["whatif", "AB"],
                                     ["compare", "AB", "RUN"]])  # compare RUN AB: compareab
def test_an_ab_directory_is_sent_to_ab_report(tmp_path: Path, capsys,
                                              command: list[str]) -> None:
    ab = tmp_path / "ab"
    (ab / "runs").mkdir(parents=True)
    (ab / "ab.json").write_text("{}")
    run = str(write_run(tmp_path, "device"))
    names = {"AB": str(ab), "RUN": run}
    assert main([names.get(c, c) for c in command]) == 3
    err = capsys.readouterr().err
    assert f"{ab}: an ab directory (ab.json, no trace): use `profplug ab-report {ab}`" in err


@pytest.mark.parametrize("command", [["report"], ["whatif"], ["compare", "RUN"]])
def test_an_unexported_nsys_report_names_the_export_command_and_nsys_option(
        tmp_path: Path, capsys, monkeypatch, command: list[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    monkeypatch.delenv("PROFPLUG_NSYS", raising=False)
    run = tmp_path / "run"
    (run / "nsys").mkdir(parents=True)
    (run / "nsys" / "report.nsys-rep").write_bytes(b"a report")
    argv = [str(run) if c == "RUN" else c for c in command]
    assert main([*argv, str(run)]) == 3
    err = capsys.readouterr().err
    assert "nsys not found to export it (use --nsys" in err
    assert f"nsys export --type sqlite --output {run}/nsys/report.sqlite" in err
    # and --nsys is an option of this command
    assert main([*argv, str(run), "--nsys", str(tmp_path / "no-bin" / "nsys")]) == 3
    # the path given is named, not "not found ... (use --nsys)"
    assert f"--nsys {tmp_path}/no-bin/nsys: no such executable" in capsys.readouterr().err
