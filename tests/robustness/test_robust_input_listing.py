"""Which files are a run's ranks: one trace named twice (through ``.``, as a directory and
its file, a symlink or a hard link) is one rank, and so are an Nsight report and its export
named together; entries named like traces that are no regular file (a FIFO, a dangling
link, a device) and folders that cannot be listed are skipped and said, never read."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers.scale.load import load_timelines
from synth import sync_loop, sync_loop_export

from profplug.cli.main import main


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
    db = sync_loop_export(tmp_path / "x.sqlite")
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"the capture")
    os.utime(db, (rep.stat().st_mtime + 10,) * 2)
    assert main(["report", str(rep), str(tmp_path / "." / "x.sqlite"), "-f", "json",
                 "--no-whatif"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ranks"]) == 1


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
