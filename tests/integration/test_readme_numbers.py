"""Every number README.md and docs/*.md quote from a shipped run is what the code prints for
it now, with nothing in the text to say so; so is every marked number of the measurement
pages (sample_traces/README.md, benchmarks/*/README.md).

README.md and docs/*.md carry no markers. Their numbers are checked two ways:

- **Example blocks.** A fenced block whose first line is ``$ profplug ...`` is that command's
  output: the test runs the command (on ``sample_traces/``, in this process) and every other
  line of the block must be a line of the output, in order (a line ``...`` marks lines left
  out).
- **Phrases.** ``tests/data/readme_numbers.json``'s ``phrases`` list, per page, each sentence
  fragment that quotes a number, with ``{}`` where the number stands and, per number, which
  command on which shipped run prints it (``source``), where in its JSON (``path``; ``over``,
  ``per``, ``reduce``, ``scale``: :func:`_value`) and in what format. The phrase with the
  computed numbers must be in the page verbatim (line breaks and spaces count as one space).
  In README.md's worked example every quantity (a number with ``us``, ``%`` or ``x``) outside
  the example blocks must lie inside such a phrase.

The measurement pages keep a marker after each number, ``6,133<!-- n:ID -->``, looked up in
the json's ``markers`` table. ``PROFPLUG_README_UPDATE=1 .venv/bin/python -m pytest
tests/integration/test_readme_numbers.py`` rewrites the phrases, the block lines that have one
output line of the same shape, and the marked numbers from the code (and still fails once, so
that the change is looked at). Figures of GPU runs that are not shipped cannot be checked: the
pages say so where they quote them ("not shipped").
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from profplug.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
SAMPLES_README = ROOT / "sample_traces/README.md"
MARKED_PAGES = [SAMPLES_README, *sorted((ROOT / "benchmarks").glob("*/README.md"))]
TABLE = ROOT / "tests/data/readme_numbers.json"
SAMPLES = ROOT / "sample_traces"
GOLDEN = ROOT / "tests/golden"
MARK = re.compile(r"(?P<num>(?:(?<=[\s(])[+-])?\d[\d,]*(?:\.\d+)?)(?P<unit>%|x| us)?(?P<bold>\**)"
                  r"<!-- n:(?P<id>[\w.]+) -->")
NUMBER = r"[+-]?\d[\d,]*(?:\.\d+)?"
QUANTITY = re.compile(NUMBER + r"(?: ?(?:us|ms)\b|%|x\b)")
# an example block of an analyzer command (re-run here); `profplug run` / `ab` blocks show
# what a job printed once, and are not re-run
BLOCK = re.compile(r"^```[^\n]*\n(?P<body>\$ profplug (?!run |ab )[^\n]*\n.*?)^```",
                   re.S | re.M)
UPDATE = os.environ.get("PROFPLUG_README_UPDATE") == "1"
GRID_DOC = ROOT / "benchmarks/h200_2026-12-01/README.md"  # the validation tables
GRID = ROOT / "benchmarks/whatif_grid_data"
KINETO_LINE = re.compile(r"^(\| (tune|held-out) \| kineto \| |\| kineto \| h\d|"
                         r"(tune|held-out|grid) kineto( --unprofiled)?: )")
SWITCH_LINE = re.compile(r"^(\| (tune|held-out) \| kineto \| h\S+ \| \d+ \(|"
                         r"(tune|held-out) kineto \(same process\): )")
SAMPLE_LINE = re.compile(r"^(\| (kineto|nsys) \| pp2_\w+ \| |samples (kineto|nsys)( --unprofiled)?: )")


pytestmark = pytest.mark.samples_read_once  # the commands these tests run


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The one folder this module's commands write to: with :func:`_doc`'s cache, each
    command runs once for every test that quotes its output."""
    return str(tmp_path_factory.mktemp("outputs"))


@cache
def _doc(source: str, tmp: str) -> dict[str, Any]:
    kind, sample = source.split(":", 1)
    out = Path(tmp) / source.replace("/", "_").replace(":", "_").replace("|", "__")
    if kind == "report" and (GOLDEN / sample / "report.json").is_file():
        # the report test_golden_outputs.py holds the code to, byte for byte (the what-if
        # replay's wall time written as 0): computed once in the suite, there
        return json.loads((GOLDEN / sample / "report.json").read_text())
    if kind == "report":
        assert main(["report", str(_where(sample)), "-f", "json", "-o",
                     str(out.with_suffix(".json"))]) == 0
        return json.loads(out.with_suffix(".json").read_text())
    if kind == "ab":  # ab-report --rewrite rewrites DIR/ab.json: on a copy
        _copy(sample, out)
        assert main(["ab-report", str(out), "--rewrite"]) in (0, 5)  # 5: a run failed, the rest used
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
    traced = _where(sample) / "traced_device"  # ab.json's what-if run, relative to its folder
    if traced.is_dir():
        (out / "traced_device").symlink_to(traced.resolve())
    return out


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _value(doc: Any, spec: dict[str, Any]) -> float:
    """The number at ``path``; ``reduce``: "max" or "min" of a list there; ``over``: that
    number in % of the one at this second path (a share the JSON does not hold); ``per``: that
    number divided by the one at this path (a ratio); ``scale``: times this (us -> ms:
    0.001)."""
    value = _get(doc, spec["path"])
    if "reduce" in spec:
        value = {"max": max, "min": min}[spec["reduce"]](v for v in value if v is not None)
    if "over" in spec:
        value = 100.0 * float(value) / float(_get(doc, spec["over"]))
    if "per" in spec:
        value = float(value) / float(_get(doc, spec["per"]))
    return float(value) * float(spec.get("scale", 1.0))


def _printed(spec: dict[str, Any], tmp: str) -> str:
    return format(_value(_doc(spec["source"], tmp), spec), spec["format"])


# ---- the user docs: example blocks and phrases, no markers ----------------------------


def _run(argv: list[str]) -> list[str]:
    """``profplug ARGV``'s stdout lines, run here from the repository's root."""
    out = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out):
        assert main(argv) == 0, argv
    return [x.rstrip() for x in out.getvalue().splitlines()]


def _shape(line: str) -> str:
    return re.sub(NUMBER, "#", line)


def block_problems(text: str, name: str) -> tuple[list[str], str]:
    """What is wrong in ``text``'s example blocks (the block line, then the line of the
    output of the same shape), and the text with those lines as the code prints them."""
    wrong: list[str] = []
    fixed = text
    for m in BLOCK.finditer(text):
        command, *shown = m["body"].rstrip("\n").split("\n")
        printed = _run(shlex.split(command)[2:])
        at = 0  # the shown lines are a subsequence of the printed ones
        for line in shown:
            if line.strip() == "...":
                continue
            line = line.rstrip()
            if line in printed[at:]:
                at = printed.index(line, at) + 1
                continue
            alike = [x for x in printed[at:] if _shape(x) == _shape(line)]
            wrong.append(f"{name}: `{command}` prints no line\n  {line}\n  the code: "
                         + (alike[0] if alike else "(no line of that shape)"))
            if len(alike) == 1:
                fixed = fixed.replace(line, alike[0], 1)
                at = printed.index(alike[0], at) + 1
    return wrong, fixed


def _pattern(template: str) -> re.Pattern[str]:
    """``template`` as a regex: ``{}`` a number (a group), any whitespace as any whitespace."""
    parts = [r"\s+".join(re.escape(w) for w in piece.split(" ")) for piece in
             template.split("{}")]
    return re.compile(f"({NUMBER})".join(parts))


def phrase_problems(text: str, name: str, phrases: list[dict[str, Any]], tmp: str
                    ) -> tuple[list[str], str, list[tuple[int, int]]]:
    """What is wrong in the page's phrases (the page's numbers against the code's), the text
    with the code's numbers, and where the phrases lie in ``text``."""
    wrong: list[str] = []
    fixed = text
    spans: list[tuple[int, int]] = []
    for phrase in phrases:
        template, specs = phrase["text"], phrase["values"]
        assert template.count("{}") == len(specs), template
        printed = [_printed(spec, tmp) for spec in specs]
        found = list(_pattern(template).finditer(text))
        if not found:
            wrong.append(f"{name}: no phrase {template!r} (the code: {printed})")
            continue
        for m in found:
            spans.append(m.span())
            shown = [m.group(i + 1) for i in range(len(specs))]
            if [s.lstrip("+") for s in shown] != [p.lstrip("+") for p in printed]:
                wrong.append(f"{name}: {m.group(0)!r}: the code prints {printed} "
                             f"({[s['source'] + ' ' + s['path'] for s in specs]})")
                new = template.format(*printed)
                fixed = fixed.replace(m.group(0), _rewrap(m.group(0), new), 1)
    return wrong, fixed, spans


def _rewrap(old: str, new: str) -> str:
    """``new`` with ``old``'s line breaks where ``old`` had them (the same words)."""
    words, out = new.split(" "), []
    for old_word, sep in zip(old.split(), [*re.findall(r"\s+", old), ""], strict=False):
        out.append((words.pop(0) if words else old_word) + sep)
    return "".join(out) + " ".join(words)


def unchecked_quantities(text: str, spans: list[tuple[int, int]], section: str) -> list[str]:
    """The quantities (a number with us, %, x) in ``section`` of ``text``, outside its example
    blocks, that no checked phrase covers."""
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    end = len(text) if end < 0 else end
    blocks = [m.span() for m in BLOCK.finditer(text)]
    return [f"{m.group(0)!r} at: ...{text[max(m.start() - 40, 0):m.end() + 10]!r}..."
            for m in QUANTITY.finditer(text, start, end)
            if not any(a <= m.start() and m.end() <= b for a, b in spans + blocks)]


def doc_problems(page: Path, text: str, phrases: list[dict[str, Any]], tmp: str
                 ) -> tuple[list[str], str]:
    """Every check of one user page (README.md or a docs/ page), its text as ``text``."""
    name = page.name if page == README else f"docs/{page.name}"
    wrong, fixed = block_problems(text, name)
    more, fixed_too, spans = phrase_problems(fixed, name, phrases, tmp)
    wrong += more
    if page == README:
        wrong += [f"README.md: a number in the worked example that no phrase checks: {x}"
                  for x in unchecked_quantities(fixed, spans, "## Worked example")]
    fixed = fixed_too
    return wrong, fixed


def _phrases() -> dict[str, list[dict[str, Any]]]:
    table = json.loads(TABLE.read_text())["phrases"]
    assert set(table) <= {str(p.relative_to(ROOT)) for p in DOCS}, "phrases of unknown pages"
    return table


def test_readme_and_docs_numbers_are_what_the_code_prints(outputs: str) -> None:
    phrases = _phrases()
    tmp = outputs
    wrong = []
    for page in DOCS:
        text = page.read_text()
        problems, fixed = doc_problems(page, text, phrases.get(str(page.relative_to(ROOT)), []),
                                       tmp)
        wrong += problems
        if fixed != text and UPDATE:
            page.write_text(fixed)
    assert not wrong, "\n".join(wrong)


def test_the_worked_example_is_checked() -> None:
    # the README's worked example shows two commands' output and quotes numbers in its
    # sentences: both are there to be checked (not an empty check)
    text = README.read_text()
    example = text[text.index("## Worked example"):]
    example = example[:example.find("\n## ", 1)]
    assert len(BLOCK.findall(example)) == 2
    assert len(_phrases()["README.md"]) >= 8


def test_a_planted_wrong_number_fails_the_check(tmp_path: Path, outputs: str) -> None:
    # given a copy of the README with one number changed in a sentence, one in an example
    # block, and one new number in the worked example that no phrase covers
    text = README.read_text()
    phrases = _phrases()["README.md"]
    tmp = outputs
    assert doc_problems(README, text, phrases, tmp)[0] == []  # the real one passes
    sentence = "on rank 1 the GPU idles 154 us per step"
    block = "   1 step  5,899.3  5,899.3  +0.0   3,920.5  35.6  1,978.8   34   154.3  1,824.5"
    extra = "is tested against the event run:"
    assert text.count(sentence) == 1 and text.count(block) == 1 and text.count(extra) == 1
    planted = (text.replace(sentence, sentence.replace("154", "155"))
               .replace(block, block.replace("3,920.5", "3,290.5"))
               .replace(extra, "is tested (12% off) against the event run:"))
    copy = tmp_path / "README.md"
    copy.write_text(planted)
    # then the check names each of the three, and the update puts the code's numbers back
    wrong, fixed = doc_problems(README, copy.read_text(), phrases, tmp)
    assert len(wrong) == 3, wrong
    assert any("idles 155 us" in w and "'154'" in w for w in wrong)
    assert any("3,290.5" in w and "3,920.5" in w for w in wrong)
    assert any("'12%'" in w for w in wrong)
    assert fixed == planted.replace("3,290.5", "3,920.5").replace("155 us per", "154 us per")


def test_phrases_match_across_line_breaks() -> None:
    text = "the GPU idles\n154 us per step, 2.6% of\na step"
    m = _pattern("idles {} us per step, {}% of a").search(text)
    assert m and m.groups() == ("154", "2.6")
    assert _rewrap("idles\n154 us", "idles 155 us") == "idles\n155 us"


def test_user_docs_carry_no_markers() -> None:
    # README.md and docs/*.md read as text: no HTML comments in them at all
    assert [p.name for p in DOCS if "<!--" in p.read_text()] == []


# ---- the measurement pages: a marker after each number ---------------------------------


def test_every_marked_number_is_what_the_code_prints(outputs: str) -> None:
    table = json.loads(TABLE.read_text())["markers"]
    texts = {page: page.read_text() for page in MARKED_PAGES}
    marks = {page: list(MARK.finditer(text)) for page, text in texts.items()}
    # every marker is in the table, every table entry is used (an id may be quoted on
    # several pages)
    used = {m["id"] for ms in marks.values() for m in ms}
    assert sorted(used) == sorted(table), "markers in the measurement pages vs table"
    tmp = outputs
    wrong = []
    for page, text in texts.items():
        fixed = text
        for m in reversed(marks[page]):
            spec = table[m["id"]]
            printed = _printed(spec, tmp)
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
    """GRID_DOC's lines matching ``pattern`` (after the line starting ``after``, before
    the one starting ``stop``) are ``printed``; PROFPLUG_README_UPDATE=1 rewrites them."""
    lines = GRID_DOC.read_text().split("\n")
    begin = next(i for i, x in enumerate(lines) if x.startswith(after)) if after else 0
    end = next(i for i, x in enumerate(lines) if x.startswith(stop))
    at = [i for i in range(begin, end) if pattern.match(lines[i])]
    shown = [lines[i] for i in at]
    if shown != printed and UPDATE and len(at) == len(printed):
        for i, x in zip(at, printed, strict=True):
            lines[i] = x
        GRID_DOC.write_text("\n".join(lines))
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
    """The validation table's per-repeat rows and summary lines of the 2-rank samples are
    what ``benchmarks/whatif_grid.py table --samples sample_traces --markdown`` prints now."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import grid_table
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    out = io.StringIO()
    grid_table.render(grid_table.build_rows(grid_table.sample_groups(SAMPLES), "samples", grid_table.SAMPLE_UNPROFILED), out,
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


def test_sample_readme_tables_are_what_the_reports_say(outputs: str) -> None:
    """sample_traces/README.md's two tables (the reports' headline figures, the bubbles) are
    what ``profplug report`` prints for each shipped run now."""
    tmp = outputs
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
