"""The Python API takes one path (str or Path) as well as a list of them, everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from profplug.analyzers import analyze, load_timelines, whatif_paths
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.scale.load import trace_files
from profplug.analyzers.scale.pathargs import as_paths
from synth import write_run


def test_as_paths_takes_one_path_or_several() -> None:
    assert as_paths("runs/a") == [Path("runs/a")]
    assert as_paths(Path("runs/a")) == [Path("runs/a")]
    assert as_paths(["a", Path("b")]) == [Path("a"), Path("b")]
    assert as_paths(p for p in ("a",)) == [Path("a")]


@pytest.mark.parametrize("form", [str, Path, lambda p: [str(p)], lambda p: (Path(p),)])
def test_every_entry_point_takes_a_str_or_a_path(tmp_path: Path, form) -> None:
    # given a two-rank run directory, passed as a str, a Path, a list or a tuple
    run = write_run(tmp_path, "device")
    (run / "run.json").write_text('{"command": ["python3"]}')
    paths = form(run)
    # when each entry point reads it, then both ranks are there (not one per character)
    assert [r.rank for r in analyze(paths).ranks] == [0, 1]
    assert [t.rank for t in load_timelines(paths)] == [0, 1]
    assert len(trace_files(paths)) == 2
    assert find_run_meta(paths) == {"command": ["python3"]}
    assert [r.rank for r in whatif_paths(paths).ranks] == [0, 1]


def test_a_missing_str_path_is_one_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"^.*nope: no such file or directory$"):
        analyze(str(tmp_path / "nope"))
