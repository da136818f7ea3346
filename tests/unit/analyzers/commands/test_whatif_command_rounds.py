"""`profplug whatif` on a big run: the what-if where the ranks are read (as the report runs
it from ``placement.ROUNDS_MIN_BYTES`` of traces), so that no timeline reaches the client;
the same JSON and page as the ones made in one process, and the same one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from profplug.analyzers.commands import whatif
from profplug.analyzers.report import analysis
from profplug.analyzers.scale import placement
from reference import blank
from synth import KinetoTrace
from synth.pipeline import PipelineSpec, write

from profplug.cli.main import main

TIMES = re.compile(r'"(replay_s|analysis_s)": [0-9.eE+-]+')


def _json(path: Path) -> str:
    return TIMES.sub(r'"\1": 0', json.dumps(json.loads(path.read_text()), sort_keys=True))


@pytest.mark.parametrize("spec, drop", [
    (PipelineSpec(stages=4, tp=2, steps=4, slow_stage=2), ["--drop", "policy"]),
    (PipelineSpec(stages=2, steps=5, sync="event", peer_in_name=False),
     ["--drop", "device-sync"]),
    # --drop-at: its call site resolved over the ranks' call sites, in a round of its own
    (PipelineSpec(stages=4, tp=2, steps=4, slow_stage=2), ["--drop-at", "recv_from"]),
    (PipelineSpec(stages=2, steps=5), ["--drop", "all-sync", "--drop-at", "send"]),
])
def test_whatif_of_a_big_run_reads_no_timeline_into_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: PipelineSpec,
        drop: list[str]) -> None:
    files, _ = write(spec, tmp_path / "run")
    run = str(files[0].parent)
    # given the what-if in one process (the timelines travel: under the threshold)
    assert main(["whatif", run, *drop, "-f", "json", "-q", "-j", "2",
                 "-o", str(tmp_path / "one.json")]) == 0
    # when the run counts as big, and the client may not load a timeline
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)

    def no_timelines(*_: object, **__: object) -> None:
        raise AssertionError("a timeline reached the client")

    monkeypatch.setattr(whatif, "load_timelines", no_timelines)
    assert main(["whatif", run, *drop, "-f", "json", "-q", "-j", "2",
                 "-o", str(tmp_path / "rounds.json")]) == 0
    # then the result is the one-process one
    assert _json(tmp_path / "rounds.json") == _json(tmp_path / "one.json")
    got = json.loads((tmp_path / "rounds.json").read_text())["whatif"]
    assert len(got["ranks"]) == len(files)
    if "--drop-at" in drop:  # the call site named, resolved to one, and its syncs dropped
        assert drop[-1] in got["callsite"] and all(r["dropped_calls"] for r in got["ranks"])


@pytest.mark.parametrize("query", ["nosuch", "pipeline_rank"])
def test_a_drop_at_that_names_no_call_site_or_several_is_the_same_one_line_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        query: str) -> None:
    files, _ = write(PipelineSpec(stages=2, steps=4), tmp_path / "run")
    args = ["whatif", str(files[0].parent), "-q", "-j", "2", "--drop-at", query]
    assert main(args) == 2
    one = capsys.readouterr().err
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    monkeypatch.setattr(whatif, "load_timelines", None)  # no timeline in the client
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == one and len(err.strip().splitlines()) == 1
    assert ("matches no call site" if query == "nosuch" else "matches 2 call sites") in err


def test_a_big_run_without_gpu_work_is_the_same_one_line_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    t = KinetoTrace(rank=0)
    t.runtime("cudaDeviceSynchronize", 0, 5)
    path = t.write(tmp_path / "r0.json")
    assert main(["whatif", str(path)]) != 0
    one = capsys.readouterr().err
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    assert main(["whatif", str(path)]) != 0
    err = capsys.readouterr().err
    assert err == one and "no GPU work" in err and len(err.strip().splitlines()) == 1


def test_what_the_rounds_cannot_do_stays_in_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --unprofiled reads the timelines in the client, whatever the size
    files, _ = write(PipelineSpec(stages=2, steps=4), tmp_path / "run")
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    calls: list[int] = []
    real = whatif.load_timelines

    def counted(*a: object, **k: object):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(whatif, "load_timelines", counted)
    assert main(["whatif", str(files[0].parent), "-q", "--unprofiled", "5000",
                 "-o", str(tmp_path / "u.txt")]) == 0
    assert len(calls) == 1


def test_the_whatif_page_of_a_big_run_reads_no_timeline_into_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files, _ = write(PipelineSpec(stages=4, tp=2, steps=6, slow_stage=1), tmp_path / "run")
    args = ["whatif", str(files[0].parent), "-q", "-j", "2", "-f", "json"]
    # given the page made in one process (the timelines travel: under the threshold)
    assert main([*args, "-o", str(tmp_path / "one.json"), "--html",
                 str(tmp_path / "one.html")]) == 0
    # when the run counts as big, and the client may not load a timeline
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)

    def no_timelines(*_: object, **__: object) -> None:
        raise AssertionError("a timeline reached the client")

    monkeypatch.setattr(whatif, "load_timelines", no_timelines)
    assert main([*args, "-o", str(tmp_path / "rounds.json"), "--html",
                 str(tmp_path / "rounds.html")]) == 0
    # then the result and its page are the one-process ones
    assert _json(tmp_path / "rounds.json") == _json(tmp_path / "one.json")
    assert blank((tmp_path / "rounds.html").read_text()) == \
        blank((tmp_path / "one.html").read_text())


def test_compare_of_big_runs_reads_no_timeline_into_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [write(PipelineSpec(stages=4, tp=2, steps=4, sync=s), tmp_path / s)[0][0].parent
            for s in ("device", "event")]
    args = ["compare", *map(str, runs), "-f", "json", "-q", "-j", "2", "-o"]
    # given the comparison with each run's timelines in the client (under the threshold)
    assert main([*args, str(tmp_path / "one.json"), "--html", str(tmp_path / "one.html")]) == 0
    # when the runs count as big, each run's report is made where its ranks are read
    monkeypatch.setattr(placement, "ROUNDS_MIN_BYTES", 0)
    real = analysis._rounds_report
    seen: list[bool] = []

    def spy(*a, **k):
        rep = real(*a, **k)
        seen.append(rep is not None)  # None: the timelines read into the client after all
        return rep

    monkeypatch.setattr(analysis, "_rounds_report", spy)
    assert main([*args, str(tmp_path / "rounds.json"), "--html",
                 str(tmp_path / "rounds.html")]) == 0
    # then each run's report was made in rounds, no timeline in the client, and the
    # comparison and its page are the same
    assert seen == [True, True]
    assert _json(tmp_path / "rounds.json") == _json(tmp_path / "one.json")
    assert blank((tmp_path / "rounds.html").read_text()) == \
        blank((tmp_path / "one.html").read_text())
