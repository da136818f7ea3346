"""``--step-range``: the host range that marks a step, exact or ``re:REGEX``, on Kineto
user annotations and Nsight NVTX ranges alike; the rule is reported (``steps_rule``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers import analyze, whatif_paths
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.steps.rule import StepRule
from synth import KinetoTrace, NsysExport

from profplug.cli.main import main

Recorder = Any  # KinetoTrace or NsysProcess: same recording methods
PERIOD = 100.0


def own_steps(t: Recorder, name: str = "decode_step", n: int = 4) -> None:
    """``n`` steps marked the user's way (record_function / NVTX ``name``), inside one
    ``generate`` range: each step a 60 us kernel, then 40 us host-bound idle."""
    t.annotation("generate", 0, n * PERIOD)
    for k in range(n):
        o = k * PERIOD
        t.annotation(name.format(k=k + 10), o + 1, PERIOD - 2)
        t.launch(o + 2, o + 3, 60)


def write(tmp_path: Path, fmt: str, record: Any = own_steps) -> Path:
    if fmt == "kineto":
        t = KinetoTrace(rank=0)
        record(t)
        return t.write(tmp_path / "rank0.json")
    ex = NsysExport()
    p = ex.process(4242)
    p.rank_mark(0)
    record(p)
    return ex.write(tmp_path / "run.sqlite")


FORMATS = ["kineto", "nsys"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_default_rule_finds_no_steps_in_user_ranges(tmp_path: Path, fmt: str) -> None:
    r = analyze(write(tmp_path, fmt)).rank(0)
    assert r.steps is None and r.steps_rule is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_exact_name_marks_the_steps(tmp_path: Path, fmt: str) -> None:
    # given a trace whose steps are record_function / NVTX ranges named "decode_step"
    r = analyze(write(tmp_path, fmt), step_range="decode_step").rank(0)
    # then they are the steps, numbered in time order, and the report says which rule
    assert r.steps is not None
    assert (r.steps.n_steps, r.steps.period_us, r.steps.step_us_mean) == (4, 100.0, 98.0)
    assert r.steps.step_numbers == [0, 1, 2, 3]
    # a 40 us gap in each step but the last (no next step: not in the per-step series)
    assert r.steps.idle_per_step_us["host_bound"] == 40.0
    assert r.steps.idle_per_step_us_mean["host_bound"] == 30.0  # 3 gaps of 40 us over 4
    assert r.steps_rule == "--step-range decode_step"


@pytest.mark.parametrize("fmt", FORMATS)
def test_regex_marks_the_steps_and_its_group_numbers_them(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path, fmt, lambda t: own_steps(t, "iteration {k}"))
    r = analyze(path, step_range=r"re:^iteration (\d+)$").rank(0)
    assert r.steps is not None and r.steps.step_numbers == [10, 11, 12, 13]
    assert r.steps_rule == r"--step-range re:^iteration (\d+)$"
    # a regex matching nothing is an error; one matching nested ranges counts the outer
    with pytest.raises(ProfplugError, match="matches no range"):
        analyze(path, step_range="re:^decode")
    outer = analyze(path, step_range="re:generate|iteration").rank(0).steps
    assert outer is not None and outer.n_steps + outer.n_dropped == 1


def both_ways(t: Recorder) -> None:
    """Each step marked both ways at the same span (profplug run does, for HTA users)."""
    for k in range(3):
        o = k * PERIOD
        t.annotation(f"ProfilerStep#{k + 7}", o, PERIOD)
        t.annotation("profplug.step", o, PERIOD)
        t.launch(o + 2, o + 3, 60)
        t.runtime("cudaDeviceSynchronize", o + 4, 60)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_step_marked_both_ways_counts_once(tmp_path: Path, fmt: str) -> None:
    r = analyze(write(tmp_path, fmt, both_ways)).rank(0)
    assert r.steps is not None and r.steps.n_steps == 3
    assert r.steps.step_numbers == [7, 8, 9] and r.steps_rule == "ProfilerStep#N"
    # and ProfilerStep#N is no call site: the sync sits in profplug.step
    assert [c.callsite for c in r.callsites] == ["profplug.step"]
    # profplug.step alone (asked for) gives the same steps, numbered in order
    s = analyze(write(tmp_path, fmt, both_ways), step_range="profplug.step").rank(0).steps
    assert s is not None and s.n_steps == 3 and s.step_numbers == [0, 1, 2]


def test_read_options_carry_the_rule(tmp_path: Path) -> None:
    path = write(tmp_path, "kineto")
    read = ReadOptions().with_step_range("decode_step")
    assert read.steps == StepRule("decode_step")
    assert analyze(path, read=read).rank(0).steps_rule == "--step-range decode_step"
    res = whatif_paths(path, step_range="decode_step")
    assert res.rank(0).basis == "step" and res.rank(0).n_steps == 4


@pytest.mark.parametrize("spec", ["", "re:", "re:(", "re:[a-"])
def test_a_bad_rule_is_one_error(spec: str) -> None:
    with pytest.raises(ProfplugError, match="--step-range"):
        StepRule.parse(spec)


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_step_range_on_report_compare_and_whatif(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path, fmt)
    out = tmp_path / "out.json"
    assert main(["report", str(path), "--step-range", "decode_step", "-f", "json",
                 "-o", str(out)]) == 0
    (r,) = json.loads(out.read_text())["ranks"]
    assert r["steps_rule"] == "--step-range decode_step" and r["steps"]["n_steps"] == 4
    assert main(["compare", str(path), str(path), "--step-range", "decode_step", "-f", "json",
                 "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["ranks"][0]["a"]["step_us"] == 100.0
    assert main(["whatif", str(path), "--step-range", "re:^decode_step$", "-f", "json",
                 "-o", str(out)]) == 0
    assert json.loads(out.read_text())["whatif"]["ranks"][0]["basis"] == "step"
    assert main(["report", str(path), "--step-range", "re:("]) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_step_range_matching_nothing_is_an_error_naming_the_ranges_there(
        tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path, fmt)
    with pytest.raises(ProfplugError) as exc:
        analyze(path, step_range="decode_stpe")
    assert str(exc.value) == ("--step-range decode_stpe matches no range on the rank; rank 0's "
                              "most frequent host ranges: 'decode_step' (4), 'generate' (1)")


@pytest.mark.parametrize("command", [["report"], ["whatif"], ["compare", "A"]])
def test_a_misspelled_step_range_prints_one_line_and_no_number(
        tmp_path: Path, capsys, command: list[str]) -> None:
    path = str(write(tmp_path, "kineto"))
    argv = [c.replace("A", path) for c in command]
    assert main([*argv, path, "--step-range", "decode-step"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "--step-range decode-step matches no range" in err and "'decode_step' (4)" in err


def test_a_step_range_found_on_some_ranks_only_is_a_warning_naming_the_others(
        tmp_path: Path) -> None:
    for rank, name in ((0, "decode_step"), (1, "other_step")):
        t = KinetoTrace(rank=rank)
        own_steps(t, name)
        t.write(tmp_path / f"rank{rank}.json")
    rep = analyze(tmp_path, step_range="decode_step")
    assert rep.rank(0).steps is not None and rep.rank(1).steps is None
    assert ("no range matches --step-range decode_step; its most frequent host ranges: "
            "'other_step' (4), 'generate' (1)") in rep.rank(1).warnings


def test_the_listing_counts_profiler_steps_as_one_name_and_cuts_long_names(
        tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    for k in range(3):
        t.annotation(f"ProfilerStep#{k}", k * PERIOD, PERIOD)
        t.annotation("x" * 100, k * PERIOD + 1, 10)
        t.launch(k * PERIOD + 2, k * PERIOD + 3, 60)
    with pytest.raises(ProfplugError) as exc:
        analyze(t.write(tmp_path / "rank0.json"), step_range="step")
    assert str(exc.value).endswith(f"'ProfilerStep#N' (3), '{'x' * 57}...' (3)")
