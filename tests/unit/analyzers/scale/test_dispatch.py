"""The dispatch layer: one task per trace file on the local pool gives the in-process report;
a file whose worker dies twice is left out with a one-line warning, the rest stands."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from profplug.analyzers.commands import report
from profplug.analyzers.commands.report import run_report
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale import dispatch
from profplug.analyzers.scale.dispatch import FileResult, LocalBackend, RankTask, gather, run_task
from profplug.analyzers.scale.load import load_ranks
from profplug.analyzers.scale.progress import Progress
from profplug.analyzers.stalls.rank import StallOptions
from reference import report_json
from synth.pipeline import PipelineSpec, write


@pytest.fixture(scope="module")
def run8(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    files, _ = write(PipelineSpec(stages=4, tp=2, steps=3), tmp_path_factory.mktemp("p8"))
    return files


def test_local_pool_gives_the_in_process_report(run8: list[Path]) -> None:
    # given a run of 8 ranks, when it is analyzed in this process and on 2 processes
    run = report_analyses(None)
    one = analyze(run8, run=run, jobs=1, progress=False)
    two = analyze(run8, run=run, backend=LocalBackend(2), progress=False)
    # then the reports are the same, every rank there, in rank order
    assert [r.rank for r in two.ranks] == list(range(8))
    assert report_json(two) == report_json(one)
    assert "cross_rank" in two.to_dict()


def test_without_run_level_analyses_no_timeline_comes_back(run8: list[Path]) -> None:
    got = load_ranks(run8, stall=StallOptions(), keep_timelines=False,
                     backend=LocalBackend(2), progress=False)
    assert got.timelines == [] and got.lost == []
    assert [s.rank for s in got.stalls] == list(range(8))
    kept = load_ranks(run8, stall=StallOptions(), backend=LocalBackend(1), progress=False)
    assert [t.rank for t in kept.timelines] == list(range(8))


class Recording(LocalBackend):
    """The local backend, keeping the tasks it was given."""

    def __init__(self, jobs: int | None = None) -> None:
        super().__init__(jobs)
        self.tasks: list[RankTask] = []

    def map(self, fn, tasks):
        self.tasks += list(tasks)
        yield from super().map(fn, tasks)


def test_the_per_rank_report_sends_no_timeline_back(run8: list[Path]) -> None:
    # given a run with GPU work, when its report has neither the what-if nor the cross-rank
    # analysis (the host-only summary stays in the list: it applies to runs without GPU work)
    rec = Recording(1)
    rep = analyze(run8, run=report_analyses(False, cross_rank=False), backend=rec,
                  progress=False, keep_gaps=False)
    # then no task sends its Timeline or its gaps back, and there is no host-only summary
    assert len(rec.tasks) == 8
    assert not any(t.keep_timeline or t.keep_gaps for t in rec.tasks)
    assert list(rep.run) == [] and [r.rank for r in rep.ranks] == list(range(8))


def _dies_on_rank3(task: RankTask) -> FileResult:
    """A worker killed while it reads rank3.json (each attempt leaves a file)."""
    if task.path.name == "rank3.json":
        marks = task.path.parent / "attempts"
        marks.mkdir(exist_ok=True)
        (marks / str(os.getpid())).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return run_task(task)


def test_a_worker_that_dies_twice_loses_its_file_only(run8: list[Path]) -> None:
    # given 8 files on 2 local processes, the one reading rank3.json killed every time
    opt = ReadOptions()
    tasks = [RankTask(f, i, opt, StallOptions(), False) for i, f in enumerate(run8)]
    res = gather(tasks, LocalBackend(2), fn=_dies_on_rank3)
    # then rank3 was tried twice, and only rank3.json is lost, with a one-line reason
    assert len(list((run8[0].parent / "attempts").iterdir())) == 2
    lost = [r for r in res if r.lost]
    assert [Path(r.path).name for r in lost] == ["rank3.json"]
    assert lost[0].lost == (f"{run8[3]}: the worker process died twice reading it (killed, "
                            "or out of memory); its ranks are not in this report")
    assert sorted(s.rank for r in res for s in r.stalls) == [0, 1, 2, 4, 5, 6, 7]


class _LosesRank5:
    """A backend that runs tasks here but loses rank5.json's, as a dead worker would."""

    name = "fake"

    def map(self, fn, tasks):
        for i, t in enumerate(tasks):
            yield i, (dispatch.lost(t, "the worker died twice") if t.path.name == "rank5.json"
                      else fn(t))

    def close(self) -> None:
        pass


def test_a_lost_file_is_a_warning_of_the_report_and_fails_strict(
        run8: list[Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    rep = analyze(run8, backend=_LosesRank5(), run=report_analyses(False), progress=False)
    assert [r.rank for r in rep.ranks] == [0, 1, 2, 3, 4, 6, 7]
    want = f"{run8[5]}: the worker died twice; its ranks are not in this report"
    assert rep.lost == [want] and rep.warnings[0] == want
    assert rep.to_dict()["warnings"][0] == want
    # the CLI path: the warning on stderr, and --strict fails
    monkeypatch.setattr(report, "open_backend", lambda jobs=None, dask=None: _LosesRank5())
    assert run_report(run8, fmt="json", whatif=False, strict=True) == 1
    assert f"warning: {want}" in capsys.readouterr().err


def test_every_file_lost_is_an_error(run8: list[Path]) -> None:
    class LosesAll(_LosesRank5):
        def map(self, fn, tasks):
            for i, t in enumerate(tasks):
                yield i, dispatch.lost(t, "gone")

    with pytest.raises(TraceError, match=r"rank0\.json: gone; its ranks are not in"):
        analyze(run8, backend=LosesAll(), progress=False)


def test_a_bad_trace_is_the_readers_error_on_any_backend(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_text("{not json")
    (tmp_path / "rank1.json").write_text("{not json either")
    for backend in (LocalBackend(1), LocalBackend(2)):
        with pytest.raises(TraceError, match=r"rank0\.json"):
            analyze(tmp_path, backend=backend, progress=False)


def test_progress_line_counts_files_ranks_and_bytes() -> None:
    import io

    out = io.StringIO()
    bar = Progress(4, 4_000_000, True, out)
    bar.done(FileResult("a", 1_000_000, n_ranks=1))
    bar.done(FileResult("b", 1_000_000, n_ranks=2, cached=True))
    bar.close()
    lines = out.getvalue().split("\r")
    assert lines[-1] == ("reading traces [###############               ] 2/4 files "
                         "(3 ranks), 2.0/4.0 MB, 1 cached\n")
    quiet = io.StringIO()
    bar = Progress(4, 4_000_000, False, quiet)
    bar.done(FileResult("a", 1_000_000, n_ranks=1))
    bar.close()
    assert quiet.getvalue() == ""


def test_without_gaps_the_per_rank_report_is_the_same(run8: list[Path]) -> None:
    full = analyze(run8, jobs=1, progress=False)
    lean = analyze(run8, backend=LocalBackend(2), progress=False, keep_gaps=False)
    assert report_json(lean) == report_json(full)
    assert all(r.gaps.start_ns.size == 0 for r in lean.ranks)
    assert sum(r.gaps.start_ns.size for r in full.ranks) > 0
    # the cross-rank analysis without a page (no swimlane) runs where the ranks are read:
    # their gaps stay there too, and its JSON is the one of the analysis in this process
    lean_x = analyze(run8, jobs=1, progress=False, keep_gaps=False, run=report_analyses(False))
    full_x = analyze(run8, jobs=1, progress=False, run=report_analyses(False))
    assert "cross_rank" in lean_x.run
    assert sum(r.gaps.start_ns.size for r in lean_x.ranks) == 0
    assert sum(r.gaps.start_ns.size for r in full_x.ranks) > 0
    assert report_json(lean_x) == report_json(full_x)


def _where_read(task: RankTask) -> FileResult:
    """No reading: the pid of the process the task ran on, carried in ``size_bytes``."""
    return FileResult(str(task.path), os.getpid())


def test_a_small_run_is_read_in_this_process_unless_jobs_are_given(tmp_path: Path) -> None:
    # given two small files, and two whose sizes add up to the pool's threshold (sparse)
    small = [tmp_path / f"small{i}.json" for i in range(2)]
    big = [tmp_path / f"big{i}.json" for i in range(2)]
    for f in small:
        f.write_text("{}")
    for f in big:
        with open(f, "wb") as out:
            out.truncate(dispatch.POOL_MIN_BYTES // 2)
    opt = ReadOptions()

    def pids(files: list[Path], backend: LocalBackend) -> set[int]:
        tasks = [RankTask(f, i, opt, StallOptions(), False) for i, f in enumerate(files)]
        return {r.size_bytes for r in gather(tasks, backend, fn=_where_read)}

    # then the small run stays in this process when the number of processes is left out,
    # and goes to the pool when it is given or the run is big enough
    assert pids(small, LocalBackend()) == {os.getpid()}
    assert os.getpid() not in pids(small, LocalBackend(2))
    if dispatch.usable_cpus() > 1:
        assert os.getpid() not in pids(big, LocalBackend())


def test_trace_bytes_count_what_reading_parses(tmp_path: Path) -> None:
    plain, gz, rep = tmp_path / "r.json", tmp_path / "r.json.gz", tmp_path / "report.nsys-rep"
    for f in (plain, gz, rep):
        f.write_bytes(b"x" * 1000)
    assert dispatch.trace_bytes(plain) == 1000
    assert dispatch.trace_bytes(gz) == 1000 * dispatch.INFLATE
    assert dispatch.trace_bytes(rep) == dispatch.POOL_MIN_BYTES  # nsys exports it first
    assert dispatch.trace_bytes(tmp_path / "missing.json") == 0
