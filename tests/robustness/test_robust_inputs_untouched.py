"""Inputs are never rewritten behind the user's back: ``ab-report DIR`` only reads
``DIR/ab.json`` (``--rewrite`` stores the new analysis), so it works on a folder it cannot
write; ``--cache`` (or ``$PROFPLUG_CACHE``) that is an input, lies inside one or holds traces
is refused before anything is written, so ``report D --cache D`` leaves D a folder of
traces."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from profplug.analyzers.core import atomicfile
from synth import ab_result, ab_runs, one_error, sync_loop

from profplug.cli.main import main


def _ab_dir(tmp_path: Path) -> Path:
    from profplug.analyzers.commands.ab_report import ab_json_text

    out = tmp_path / "ab"
    out.mkdir()
    res = ab_result(ab_runs(rounds=3), rounds=3)
    doc = json.loads(ab_json_text(res))
    doc["summary"]["event"]["speedup_ci95"] = [1.5, 2.5]  # an older analysis's figures
    (out / "ab.json").write_text(json.dumps(doc))
    return out


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_ab_report_leaves_ab_json_as_it_was(tmp_path: Path, capsys) -> None:
    out = _ab_dir(tmp_path)
    before = _state(out)
    assert main(["ab-report", str(out)]) == 0
    assert _state(out) == before
    assert "left as it was (--rewrite stores this analysis)" in capsys.readouterr().err


def test_ab_report_reads_a_folder_it_cannot_write(tmp_path: Path, capsys,
                                                  monkeypatch) -> None:
    out = _ab_dir(tmp_path)
    before = _state(out)

    def read_only(*args: object, **kw: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(atomicfile.tempfile, "mkstemp", read_only)
    assert main(["ab-report", str(out)]) == 0  # nothing to write
    assert "verdict: event" in capsys.readouterr().out
    assert main(["ab-report", str(out), "--rewrite"]) == 2  # asked to write: one line
    assert "Read-only file system" in one_error(capsys)
    assert _state(out) == before


def test_ab_report_rewrite_stores_the_new_analysis(tmp_path: Path) -> None:
    out = _ab_dir(tmp_path)
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    doc = json.loads((out / "ab.json").read_text())
    assert doc["summary"]["event"]["speedup_ci95"] != [1.5, 2.5]  # today's, stored


def test_ab_report_json_is_the_ab_json_it_would_store(tmp_path: Path, capsys) -> None:
    out = _ab_dir(tmp_path)
    assert main(["ab-report", str(out), "-f", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    assert printed == json.loads((out / "ab.json").read_text())


def test_ab_report_refuses_a_format_it_has_not(tmp_path: Path, capsys) -> None:
    assert main(["ab-report", str(_ab_dir(tmp_path)), "-f", "csv"]) == 2
    assert "ab-report writes table or json" in one_error(capsys)


def _run(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    sync_loop(d / "rank0.json")
    return d


def test_a_cache_in_the_input_folder_is_refused_and_the_folder_stays_traces(
        tmp_path: Path, capsys) -> None:
    d = _run(tmp_path)
    before = _state(d)
    assert main(["report", str(d), "--cache", str(d)]) == 2
    assert "is the input" in one_error(capsys)
    assert _state(d) == before  # no CACHEDIR.TAG, no entry
    assert main(["report", str(d), "-q"]) == 0  # still a folder of traces
    assert main(["report", str(d), "--cache", str(d / "cache")]) == 2
    assert "lies inside the input" in one_error(capsys)
    assert _state(d) == before


def test_a_cache_holding_the_input_or_traces_is_refused(tmp_path: Path, capsys) -> None:
    d = _run(tmp_path)
    assert main(["report", str(d), "--cache", str(tmp_path)]) == 2  # above the input
    assert "holds the input" in one_error(capsys)
    other = tmp_path / "other"
    other.mkdir()
    sync_loop(other / "rank0.json")
    assert main(["report", str(d), "--cache", str(other)]) == 2
    assert "holds trace files" in one_error(capsys)
    assert not (other / "CACHEDIR.TAG").exists()


@pytest.mark.parametrize("cmd", [["whatif"], ["compare", "A"]])
def test_the_cache_check_holds_for_every_command_and_the_environment(
        tmp_path: Path, capsys, monkeypatch, cmd: list[str]) -> None:
    d = _run(tmp_path)
    argv = [str(d) if c == "A" else c for c in cmd]
    monkeypatch.setenv("PROFPLUG_CACHE", str(d))
    assert main([*argv, str(d)]) == 2
    assert "--cache" in one_error(capsys)
    assert not (d / "CACHEDIR.TAG").exists()


def test_a_cache_of_its_own_is_used(tmp_path: Path) -> None:
    d = _run(tmp_path)
    cache = tmp_path / "cache"
    assert main(["report", str(d), "--cache", str(cache), "-q"]) == 0
    assert (cache / "CACHEDIR.TAG").exists()
    assert main(["report", str(d), "--cache", str(cache), "-q"]) == 0  # tagged: accepted
    assert os.listdir(d) == ["rank0.json"]
