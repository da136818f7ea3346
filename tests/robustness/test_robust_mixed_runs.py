"""Traces that are not one run, or two runs that are one, are said before any figure: a
folder holding several runs and traces of two runs (each with its run.json) are refused in
one line naming them; ranks whose wall clocks are seconds apart are warned first; ranks
with and without a base clock say why nothing joins them; ``compare`` says when A and B are
the same traces (a hard-linked copy), were traced by different tools, or A is an ab
directory; ``whatif --against`` a run that still synchronizes says so; an error names the
run it comes from; a rank header that is no rank is named."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from synth import KinetoTrace, one_error, two_ranks

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ROOT = Path(__file__).resolve().parents[2]
PP2 = ROOT / "sample_traces" / "pp2_infer_kineto"
WAITS = ROOT / "sample_traces" / "h200_three_waits"


def test_a_folder_of_several_runs_names_them(capsys) -> None:
    assert main(["report", str(PP2)]) == 3
    line = one_error(capsys)
    assert "holds 2 runs (device/, event/)" in line and "profplug compare A B" in line


def test_ranks_of_two_runs_are_refused(tmp_path: Path, capsys) -> None:
    files = f"{PP2}/device/kineto/rank0.json.gz,{PP2}/event/kineto/rank1.json.gz"
    assert main(["report", files]) == 3
    assert "the traces come from 2 runs" in one_error(capsys)
    assert main(["whatif", str(PP2 / "device"), str(PP2 / "event")]) == 3
    assert "profplug whatif A --against B" in one_error(capsys)


def test_ranks_whose_wall_clocks_are_seconds_apart_are_warned_first(tmp_path: Path,
                                                                     capsys) -> None:
    two_ranks(tmp_path, skew=14_400_000.0)  # rank 1 of a run 14.4 s later
    assert main(["report", str(tmp_path), "-f", "json", "-q"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "wall clocks are 14.4 s apart" in err[0] and "of one run" in err[0]
    two_ranks(tmp_path, skew=300.0)  # one run's ranks: no such warning
    assert main(["report", str(tmp_path), "-f", "json", "-q"]) == 0
    assert "apart" not in capsys.readouterr().err


def test_ranks_with_and_without_a_base_clock_say_why_nothing_joins_them(tmp_path: Path,
                                                                        capsys) -> None:
    for r in (0, 1):
        t = KinetoTrace(rank=r)
        for i in range(5):
            t.launch(10 + 30 * i, 12 + 30 * i, 10)
        d = t.to_dict()
        if r == 1:
            d.pop("baseTimeNanoseconds")
        (tmp_path / f"rank{r}.json").write_text(json.dumps(d))
    assert main(["report", str(tmp_path), "-f", "json", "-q"]) == 0
    doc_err = capsys.readouterr().err
    assert "mixed clocks (ranks [0] on the wall clock, ranks [1] on their own" in doc_err


def test_a_hard_linked_copy_is_the_same_run(tmp_path: Path, capsys) -> None:
    copy = tmp_path / "copy" / "kineto"
    copy.mkdir(parents=True)
    for f in (PP2 / "device" / "kineto").iterdir():
        try:
            os.link(f, copy / f.name)
        except OSError:  # another file system: a copy, the same content
            shutil.copyfile(f, copy / f.name)
    assert main(["compare", str(PP2 / "device"), str(copy.parent), "-q"]) == 0
    assert "are the same run (the same traces, by content)" in capsys.readouterr().out


def test_compare_says_the_tools_differ(capsys) -> None:
    assert main(["compare", str(WAITS / "kineto"), str(WAITS / "nsys"), "-f", "json",
                 "-q"]) == 0
    assert ("kineto was traced by Kineto (torch.profiler), nsys by Nsight Systems"
            in capsys.readouterr().err)


def test_compare_with_an_ab_directory_first_says_what_it_took(capsys) -> None:
    ab = ROOT / "sample_traces" / "ab_h200_decode_loop"
    assert main(["compare", str(ab), str(ab / "traced_device"), "-f", "json", "-q"]) == 0
    err = capsys.readouterr().err
    assert "is a profplug ab directory: run A is the traced run in it (traced_device" in err
    assert f"profplug compare {ab / 'traced_device'} {ab}" in err


def test_whatif_against_a_run_that_still_synchronizes_is_warned(tmp_path: Path,
                                                                 capsys) -> None:
    dev = str(PP2 / "device")
    assert main(["whatif", dev, "--against", dev, "-f", "json"]) == 0
    assert "is the same run as the one predicted" in capsys.readouterr().err
    assert main(["whatif", str(PP2 / "event"), "--against", dev, "-f", "json"]) == 0
    assert "still synchronizes: 80 device-wide synchronize(s)" in capsys.readouterr().err
    assert main(["whatif", dev, "--against", str(PP2 / "event"), "-f", "json"]) == 0
    assert "still synchronizes" not in capsys.readouterr().err


def test_an_error_of_one_compared_run_names_it(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, name in ((a, "decode_step"), (b, "other_step")):
        d.mkdir()
        t = KinetoTrace(rank=0)
        for i in range(4):
            t.annotation(name, 30 * i, 25)
            t.launch(30 * i + 1, 30 * i + 3, 10)
        t.write(d / "rank0.json")
    assert main(["compare", str(a), str(b), "--step-range", "decode_step"]) == 2
    assert f"run B ({b})" in one_error(capsys)


def test_a_rank_header_that_is_no_rank_is_named(tmp_path: Path, capsys) -> None:
    KinetoTrace(rank=1).write(tmp_path / "a.json")
    d = KinetoTrace(rank=1).to_dict()
    d["distributedInfo"]["rank"] = True
    (tmp_path / "b.json").write_text(json.dumps(d))
    assert main(["report", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 3
    line = one_error(capsys)
    assert "rank 1 appears twice" in line and "distributedInfo.rank 'True' is not a rank" in line
