"""Every number README.md, docs/*.md, sample_traces/README.md and benchmarks/h200_2026-12-01/
README.md quote from a shipped run is what the code prints for it.

A number carries a marker right after it, ``6,133<!-- n:ID -->`` (invisible once rendered);
``tests/data/readme_numbers.json`` says, per ID (one table for all pages), which command on
which shipped run (``sample_traces/`` or ``benchmarks/``) prints it (``report:``, ``ab:``,
``compare:A|B``, ``observer:``: the observer effect the report prints from run.json), where
in that command's JSON (``reduce``, ``over``, ``scale``: :func:`_value`), and in what format. Numbers that the
robust per-step statistic will move are
marked ``moves_with``: regenerate them at merge with
``PROFPLUG_README_UPDATE=1 .venv/bin/python -m pytest tests/integration/test_readme_numbers.py``,
which rewrites the marked numbers in the pages from the code (and still fails once, so that
the change is looked at). Figures of GPU runs that are not shipped cannot be checked: the
pages say so where they quote them ("not shipped").
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SAMPLES_README = ROOT / "sample_traces/README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), SAMPLES_README,
         ROOT / "benchmarks/h200_2026-12-01/README.md"]
TABLE = ROOT / "tests/data/readme_numbers.json"
SAMPLES = ROOT / "sample_traces"
MARK = re.compile(r"(?P<num>(?:(?<=[\s(])[+-])?\d[\d,]*(?:\.\d+)?)(?P<unit>%|x| us)?(?P<bold>\**)"
                  r"<!-- n:(?P<id>[\w.]+) -->")
UPDATE = os.environ.get("PROFPLUG_README_UPDATE") == "1"
WHATIF = ROOT / "docs/whatif.md"
GRID = ROOT / "benchmarks/whatif_grid_data"
KINETO_LINE = re.compile(r"^(\| (tune|held-out) \| kineto \| |\| kineto \| h\d|"
                         r"(tune|held-out|grid) kineto( --unprofiled)?: )")
SWITCH_LINE = re.compile(r"^(\| (tune|held-out) \| kineto \| h\S+ \| \d+ \(|"
                         r"(tune|held-out) kineto \(same process\): )")
SAMPLE_LINE = re.compile(r"^(\| (kineto|nsys) \| pp2_\w+ \| |samples (kineto|nsys)( --unprofiled)?: )")

@cache
def _doc(source: str, tmp: str) -> dict[str, Any]:
    kind, sample = source.split(":", 1)
    out = Path(tmp) / source.replace("/", "_").replace(":", "_").replace("|", "__")
    if kind == "report":
        assert main(["report", str(_where(sample)), "-f", "json", "-o",
                     str(out.with_suffix(".json"))]) == 0
        return json.loads(out.with_suffix(".json").read_text())
    if kind == "ab":  # ab-report rewrites DIR/ab.json: on a copy
        _copy(sample, out)
        assert main(["ab-report", str(out)]) == 0
        return json.loads((out / "ab.json").read_text())
    if kind == "compare":  # 'compare:A|B': profplug compare A B (B an ab dir: on a copy)
        a, b = sample.split("|")
        where_b = _where(b)
        if (where_b / "ab.json").is_file():
            where_b = _copy(b, out / "b" / Path(b).name)
        assert main(["compare", str(_where(a)), str(where_b), "-f", "json", "-o",
                     str(out.with_suffix(".json"))]) == 0
        return json.loads(out.with_suffix(".json").read_text())
    if kind == "observer":  # the observer effect the report prints from DIR/run.json
        from profplug.analyzers.steps.observer import from_meta

        return from_meta(json.loads((_where(sample) / "run.json").read_text())) or {}
    raise AssertionError(f"unknown source {source}")


def _where(sample: str) -> Path:
    return ROOT / sample if sample.startswith("benchmarks/") else SAMPLES / sample


def _copy(sample: str, out: Path) -> Path:
    shutil.copytree(_where(sample), out, ignore=shutil.ignore_patterns(
        "traced_device", "timing_paired", "*.html"))
    return out


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _value(doc: Any, spec: dict[str, Any]) -> float:
    """The number at ``path``; ``reduce``: "max" or "min" of a list there; ``over``: that
    number in % of the one at this second path (a share the JSON does not hold); ``scale``:
    times this (us -> ms: 0.001)."""
    value = _get(doc, spec["path"])
    if "reduce" in spec:
        value = {"max": max, "min": min}[spec["reduce"]](v for v in value if v is not None)
    if "over" in spec:
        value = 100.0 * float(value) / float(_get(doc, spec["over"]))
    return float(value) * float(spec.get("scale", 1.0))


def test_every_marked_number_is_what_the_code_prints(tmp_path_factory: pytest.TempPathFactory
                                                     ) -> None:
    table = {k: v for k, v in json.loads(TABLE.read_text()).items() if not k.startswith("_")}
    texts = {page: page.read_text() for page in PAGES}
    marks = {page: list(MARK.finditer(text)) for page, text in texts.items()}
    # every marker is in the table, every table entry is used (an id may be quoted on
    # several pages)
    used = {m["id"] for ms in marks.values() for m in ms}
    assert sorted(used) == sorted(table), "markers in README.md and docs/*.md vs table"
    tmp = str(tmp_path_factory.mktemp("readme"))
    wrong = []
    for page, text in texts.items():
        fixed = text
        for m in reversed(marks[page]):
            spec = table[m["id"]]
            value = _value(_doc(spec["source"], tmp), spec)
            printed = format(float(value), spec["format"])
            shown = m["num"].lstrip("+")
            if shown != printed.lstrip("+"):
                wrong.append(f"{m['id']}: {page.relative_to(ROOT)} {m['num']}, the code "
                             f"prints {printed} ({spec['source']} {spec['path']})")
                fixed = fixed[:m.start("num")] + printed + fixed[m.end("num"):]
        if fixed != text and UPDATE:
            page.write_text(fixed)
    assert not wrong, "\n".join(wrong)


def test_markers_are_found_with_signs_units_and_bold() -> None:
    text = ("a -7.1%<!-- n:a --> b (+8.0%<!-- n:b -->) c 1,234.5 us<!-- n:c --> "
            "d **1.09x**<!-- n:d -->")
    assert [(m["num"], m["unit"], m["id"]) for m in MARK.finditer(text)] == [
        ("-7.1", "%", "a"), ("+8.0", "%", "b"), ("1,234.5", " us", "c"), ("1.09", "x", "d")]


def _check_lines(printed: list[str], pattern: re.Pattern[str], stop: str, after: str = ""
                 ) -> None:
    """docs/whatif.md's lines matching ``pattern`` (after the line starting ``after``, before
    the one starting ``stop``) are ``printed``; PROFPLUG_README_UPDATE=1 rewrites them."""
    lines = WHATIF.read_text().split("\n")
    begin = next(i for i, x in enumerate(lines) if x.startswith(after)) if after else 0
    end = next(i for i, x in enumerate(lines) if x.startswith(stop))
    at = [i for i in range(begin, end) if pattern.match(lines[i])]
    shown = [lines[i] for i in at]
    if shown != printed and UPDATE and len(at) == len(printed):
        for i, x in zip(at, printed, strict=True):
            lines[i] = x
        WHATIF.write_text("\n".join(lines))
    assert shown == printed


def test_whatif_kineto_grid_rows_are_what_the_table_prints(capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """The validation table's Kineto rows and lines are what ``whatif_grid.py table`` prints
    now from the shipped Kineto grid (the Nsight exports are not shipped: not checked)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import whatif_grid
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    capsys.readouterr()
    assert whatif_grid.main(["table", str(GRID / "gridA"), str(GRID / "gridB"), "--ab",
                             str(GRID / "ab"), "--markdown"]) == 0
    printed = [x for x in capsys.readouterr().out.splitlines() if KINETO_LINE.match(x)]
    assert len(printed) == 20, printed  # 8 shapes in two tables, 4 lines
    _check_lines(printed, KINETO_LINE, "<!-- whatif_grid table: end")
    # and the same-process table (switchS1, switchS2)
    assert whatif_grid.main(["switch-table", str(GRID / "switchS1"), str(GRID / "switchS2"),
                             "--markdown"]) == 0
    printed = [x for x in capsys.readouterr().out.splitlines() if SWITCH_LINE.match(x)]
    assert len(printed) == 10, printed  # 8 shapes, 2 lines
    _check_lines(printed, SWITCH_LINE, "<!-- whatif_grid switch-table: end", after=
                 "<!-- whatif_grid switch-table: begin")


def test_whatif_sample_rows_are_what_the_table_prints() -> None:
    """docs/whatif.md's per-repeat rows and summary lines of the 2-rank samples are what
    ``benchmarks/whatif_grid.py table --samples sample_traces --markdown`` prints now."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import grid_table as gt
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    out = io.StringIO()
    gt.render(gt.build_rows(gt.sample_groups(SAMPLES), "samples", gt.SAMPLE_UNPROFILED), out,
              markdown=True)
    printed = [x for x in out.getvalue().splitlines() if SAMPLE_LINE.match(x)]
    assert len(printed) == 12, printed  # 8 rows (2 profilers x 2 jobs x 2 ranks), 4 lines
    _check_lines(printed, SAMPLE_LINE, "<!-- whatif_grid table: end")


HEADLINE_RUNS = ("pp2_infer_kineto/device", "pp2_infer_kineto/event", "pp2_infer_nsys/device",
                 "pp2_infer_nsys/event", "pp2_megatron_kineto/device",
                 "pp2_megatron_kineto/event", "pp2_megatron_nsys/device",
                 "pp2_megatron_nsys/event", "h200_three_waits/kineto", "h200_three_waits/nsys")
BUBBLE_RUNS = ("pp2_infer_kineto", "pp2_infer_nsys", "pp2_infer_repeats/kineto2",
               "pp2_infer_repeats/kineto3", "pp2_megatron_kineto", "pp2_megatron_nsys")


def _headline_row(run: str, doc: dict[str, Any]) -> str:
    """A row of sample_traces/README.md's "What the reports say" table, from the report."""
    rk = doc["ranks"]
    win = [r["window_us"] for r in rk]

    def share(vals: list[float]) -> str:
        if all(v == 0 for v in vals):
            return "0"
        return " / ".join(f"{100 * v / w:.1f}" for v, w in zip(vals, win, strict=True)) + "%"

    if len(rk) == 1:
        st = rk[0]["steps"]
        step = f"{st['period_us']:,.0f} us (host range {st['step_us_p50']:,.0f})"
    else:
        step = " / ".join(f"{r['steps']['period_us']:,.0f}" for r in rk) + " us"
    cause = [[r["idle_by_cause_us"][c] for r in rk] for c in ("device_sync", "event_sync",
                                                               "host_bound")]
    return (f"| {run} | {' / '.join(str(r['rank']) for r in rk)} | {step} | "
            f"{share([r['busy_us'] for r in rk])} | " + " | ".join(share(v) for v in cause)
            + " |")


def _bubble_rows(run: str, device: dict[str, Any], event: dict[str, Any]) -> list[str]:
    """The rows of its "Bubbles across ranks" table: per step, the mean over the steps."""
    cells: dict[int, list[str]] = {}
    for doc in (device, event):
        for b in doc["cross_rank"]["bubbles"]:
            bub, wait = b["bubble_per_step_us_mean"], b["comm_wait_per_step_us_mean"]
            cells.setdefault(b["rank"], []).append(
                f"{bub - wait:,.0f} + {wait:,.0f} = {bub:,.0f} ({b['bubble_pct']:.1f}%)")
    return [f"| {run if i == 0 else ''} | {rank} | {c[0]} | {c[1]} |".replace("|  |", "| |")
            for i, (rank, c) in enumerate(sorted(cells.items()))]


def _table_after(lines: list[str], header: str) -> list[int]:
    """The indices of the body rows of the Markdown table whose header starts ``header``."""
    at = next(i for i, x in enumerate(lines) if x.startswith(header)) + 2
    end = at
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return list(range(at, end))


def test_sample_readme_tables_are_what_the_reports_say(tmp_path_factory: pytest.TempPathFactory
                                                        ) -> None:
    """sample_traces/README.md's two tables (the reports' headline figures, the bubbles) are
    what ``profplug report`` prints for each shipped run now."""
    tmp = str(tmp_path_factory.mktemp("samples"))
    headline = [_headline_row(r, _doc(f"report:{r}", tmp)) for r in HEADLINE_RUNS]
    bubbles = [row for r in BUBBLE_RUNS for row in _bubble_rows(
        r, _doc(f"report:{r}/device", tmp), _doc(f"report:{r}/event", tmp))]
    lines = SAMPLES_README.read_text().split("\n")
    wrong = []
    for header, rows in (("| run | rank | step | busy", headline),
                         ("| run | rank | device: idle + peer wait", bubbles)):
        at = _table_after(lines, header)
        wrong += [f"{lines[i]}\n  the code: {row}" for i, row in zip(at, rows, strict=False)
                  if lines[i] != row]
        assert len(at) == len(rows), header
        if UPDATE:
            for i, row in zip(at, rows, strict=True):
                lines[i] = row
    if wrong and UPDATE:
        SAMPLES_README.write_text("\n".join(lines))
    assert not wrong, "\n".join(wrong)
