"""``--dask``: a LocalCluster of 2 worker processes gives the local report of 16 synthetic
ranks, and a worker killed on one file costs that file a retry, then a one-line error,
while the other ranks stand. (dask[distributed] comes with the test extra.)"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import added_analysis
import cloudpickle
import pytest
from added_analysis import BY_RANK, added
from profplug.analyzers.commands.report import run_report
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.render.timeline_data import GAPS_KEPT
from profplug.analyzers.report.analysis import Report, analyze
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.scale import placement
from profplug.analyzers.scale.dask_backend import DaskBackend, parse_local
from profplug.analyzers.scale.dispatch import FileResult, RankTask, gather, run_task
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.rank import StallOptions
from profplug.analyzers.whatif import whatif
from reference import one_process, page
from synth.pipeline import PipelineSpec, write

TIMES = re.compile(r'"(replay_s|analysis_s)": [0-9.eE+-]+')  # wall times inside the JSON


def report_json(rep: Report) -> str:
    """The JSON report with its wall-time fields zeroed (they differ from run to run)."""
    return TIMES.sub(r'"\1": 0', json.dumps(rep.to_dict(), sort_keys=True))

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
cloudpickle.register_pickle_by_value(added_analysis)


@pytest.fixture(scope="module")
def run16(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    files, _ = write(PipelineSpec(stages=4, tp=4, steps=3), tmp_path_factory.mktemp("p16"))
    return files


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskBackend]:
    backend = DaskBackend("local:2")
    try:
        yield backend
    finally:
        backend.close()


def _worker_settings() -> tuple[bool, int]:
    import dask

    return dask.config.get("distributed.diagnostics.nvml"), \
        dask.config.get("distributed.scheduler.allowed-failures")


def test_a_local_clusters_workers_monitor_no_gpu(cluster: DaskBackend) -> None:
    # the workers run without NVML monitoring (~19 MB each on a GPU host), with the
    # cluster's settings (a dead worker's task retried once)
    got = cluster.client.run(_worker_settings)
    assert len(got) == 2 and set(got.values()) == {(False, 1)}


def test_a_local_cluster_gives_the_local_report(run16: list[Path],
                                                cluster: DaskBackend) -> None:
    run = report_analyses(None)
    local = analyze(run16, run=run, jobs=1, progress=False)
    dask = analyze(run16, run=run, backend=cluster, progress=False)
    assert [r.rank for r in dask.ranks] == list(range(16))
    assert "whatif" in dask.run and "cross_rank" in dask.run
    assert report_json(dask) == report_json(local)


def test_the_cache_through_the_cluster_gives_the_local_report(
        run16: list[Path], cluster: DaskBackend, tmp_path: Path) -> None:
    # given the workers writing the timelines and stall analyses, the client the what-if
    read = ReadOptions(cache_dir=str(tmp_path / "cache"))
    run = report_analyses(None)
    first = analyze(run16, run=run, backend=cluster, read=read, progress=False)
    # when the report and the per-rank report are made again through the cache
    again = analyze(run16, run=run, backend=cluster, read=read, progress=False)
    per_rank = analyze(run16, run=report_analyses(False, cross_rank=False), backend=cluster,
                       read=read, progress=False)
    # then the report is the first one, the local one bar the wall times, and so is the
    # per-rank report
    assert json.dumps(again.to_dict()) == json.dumps(first.to_dict())
    assert report_json(again) == report_json(analyze(run16, run=run, jobs=1, progress=False))
    assert report_json(per_rank) == report_json(
        analyze(run16, run=report_analyses(False, cross_rank=False), jobs=1, progress=False))
    names = [p.name for p in (tmp_path / "cache").iterdir()]
    assert sum(n.endswith(".npz") for n in names) == 16
    assert sum(n.startswith("ranks-") for n in names) == 16
    assert sum(n.startswith("run-") for n in names) == 1  # the what-if


def test_the_whatif_of_timelines_read_on_the_cluster_is_the_local_one(
        run16: list[Path], cluster: DaskBackend) -> None:
    here = load_timelines(run16, jobs=1, progress=False)
    there = load_timelines(run16, backend=cluster, progress=False)

    def js(tls: list) -> str:
        return TIMES.sub("", json.dumps(whatif(tls).to_dict(), sort_keys=True))

    assert js(there) == js(here)


def _dies_on_rank5(task: RankTask) -> FileResult:
    """Kill the worker that reads rank5.json (each attempt leaves a file)."""
    if task.path.name == "rank5.json":
        marks = task.path.parent / "attempts"
        marks.mkdir(exist_ok=True)
        (marks / f"{os.getpid()}").touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return run_task(task)


def test_a_killed_worker_costs_a_retry_then_a_per_rank_error(run16: list[Path],
                                                             cluster: DaskBackend) -> None:
    tasks = [RankTask(f, i, ReadOptions(), StallOptions(), False) for i, f in enumerate(run16)]
    res = gather(tasks, cluster, fn=_dies_on_rank5)
    assert len(list((run16[0].parent / "attempts").iterdir())) == 2  # tried, then retried
    lost = [r.lost for r in res if r.lost]
    assert lost == [f"{run16[5]}: the Dask worker running it died twice (killed, or out of "
                    "memory); its ranks are not in this report"]
    assert sorted(s.rank for r in res for s in r.stalls) == [r for r in range(16) if r != 5]


@pytest.mark.parametrize("whatif", [False, None], ids=["no-whatif", "whatif"])
def test_the_run_level_parts_on_the_cluster_give_the_local_report(
        run16: list[Path], cluster: DaskBackend, monkeypatch: pytest.MonkeyPatch,
        whatif: bool | None) -> None:
    # given a report without a page (and a run over the size from which the what-if runs
    # where the ranks are read): the cross-rank analysis and the what-if run on the workers
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    run = report_analyses(whatif)
    local = one_process(run16, run, monkeypatch)
    dask = analyze(run16, run=run, backend=cluster, progress=False, keep_gaps=False)
    assert "cross_rank" in dask.run and ("whatif" in dask.run) == (whatif is None)
    assert report_json(dask) == report_json(local)


def test_a_page_made_on_the_cluster_is_the_one_made_in_one_process(
        run16: list[Path], cluster: DaskBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a report with a page, over the size from which the what-if runs where the ranks
    # are read: the swimlane's rows are made on the workers too
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    run = report_analyses(None)
    local = one_process(run16, run, monkeypatch)
    dask = analyze(run16, run=run, backend=cluster, progress=False, keep_gaps=True,
                   gaps_per_device=GAPS_KEPT)
    assert dask.run["cross_rank"].swimlane is not None and "whatif" in dask.run
    assert page(dask) == page(local)


def _dies_in_round_two_on_rank5(task: RankTask) -> FileResult:
    """Kill the worker that makes rank 5's cross-rank part (each attempt leaves a file)."""
    if task.path.name == "rank5.json" and task.stall is None:
        marks = task.path.parent / "attempts2"
        marks.mkdir(exist_ok=True)
        (marks / f"{os.getpid()}").touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return run_task(task)


def test_a_worker_killed_in_the_second_round_costs_the_run_level_analyses_only(
        run16: list[Path], cluster: DaskBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    from profplug.analyzers.scale import run_level

    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    real = run_level.gather
    monkeypatch.setattr(run_level, "gather",
                        lambda tasks, backend: real(tasks, backend,
                                                    fn=_dies_in_round_two_on_rank5))
    rep = analyze(run16, run=report_analyses(None), backend=cluster, progress=False,
                  keep_gaps=False)
    assert len(list((run16[0].parent / "attempts2").iterdir())) == 2  # tried, then retried
    assert "cross_rank" not in rep.run and "whatif" not in rep.run
    assert [r.rank for r in rep.ranks] == list(range(16))
    why = (f"ranks [5]: {run16[5]}: the Dask worker running it died twice (killed, or out of "
           "memory); its ranks are not in this report")
    assert [w for w in rep.warnings if "not run" in w] == [
        f"what-if not run: {why}", f"cross-rank analysis not run: {why}"]


def test_addresses() -> None:
    assert parse_local("local") == 0 and parse_local("local:3") == 3
    assert parse_local("tcp://h:8786") is None
    with pytest.raises(ProfplugError, match="local:N needs a number of workers"):
        parse_local("local:x")
    with pytest.raises(ProfplugError, match="no such scheduler file"):
        DaskBackend("/no/such/scheduler.json")


@pytest.mark.slow
def test_profplug_report_dask_local(run16: list[Path], capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    assert run_report(run16, fmt="json", dask="local:2", quiet=True) == 0
    there = TIMES.sub("", capsys.readouterr().out)
    assert run_report(run16, fmt="json", jobs=1, quiet=True) == 0
    assert TIMES.sub("", capsys.readouterr().out) == there


def test_an_analysis_added_by_one_registry_line_runs_on_the_cluster(
        run16: list[Path], cluster: DaskBackend, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    added(monkeypatch, BY_RANK)
    rep = analyze(run16, run=report_analyses(False, cross_rank=False), backend=cluster,
                  progress=False)
    want = {tl.rank: int(tl.n_gpu) for tl in load_timelines(run16, jobs=1)}
    assert rep.run["op_counts"].to_dict() == {"per_rank": {str(k): v for k, v in want.items()}}
