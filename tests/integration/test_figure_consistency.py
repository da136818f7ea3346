"""One figure, one value: every command in every format on every shipped run and pair states
each figure a user reads the same way (to its printed precision).

For each device/event pair of ``sample_traces/`` (and the Megatron-Core PP=2 client in
``/work/shared/traces/mcore_pp2_client`` when present): ``report`` (table, JSON, CSV, the
HTML's text), ``whatif`` (table, JSON), ``whatif --against EVENT`` (table, JSON, the HTML's
text), ``whatif --unprofiled`` (table, JSON, the HTML's text) and ``compare DEVICE EVENT``
(table, JSON, the HTML's text); for the A/B sample, ``ab-report`` (table, JSON, the page's
text), ``whatif --unprofiled`` at ab's device median and at the ab directory itself, and
``compare TRACED AB_DIR`` (table, JSON, the page's text). Every output
runs in this process through the command line's own entry (``main``), each run read once,
except those ``test_golden_outputs.py`` pins byte for byte (a shipped run's ``report`` and
``whatif`` table, JSON and CSV, a pair's ``compare`` table and JSON): those are read from
their goldens, so that the suite computes each of them once.
The figures (``tests/figures_seen.py``): each rank's step and the run's, the synchronize idle
per step and per call site, the stream waits, the pipeline's predicted step, its rank, its
speedup, each band by its target, and compare's B - A; and two rules read off one output:
one headline per output, and an against row's ``inside`` judged with the band it prints.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import figures_seen
import pytest

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
CLIENT = Path("/work/shared/traces/mcore_pp2_client")
AB = SAMPLES / "ab_h200_decode_loop"
GOLDEN = ROOT / "tests" / "golden"

RUNS = sorted(p.parent for p in SAMPLES.rglob("run.json"))
PAIRS = [(r, r.with_name("event")) for r in RUNS if r.name == "device"
         and r.with_name("event") in RUNS]
if (CLIENT / "device").is_dir() and (CLIENT / "event").is_dir():
    PAIRS.append((CLIENT / "device", CLIENT / "event"))


def _run(args: list[str], out: Path) -> str:
    assert main([*args, "-o", str(out)]) == 0, args
    return out.read_text()


def _golden(run: Path) -> Path | None:
    """The goldens of a shipped run (or pair: its folder), None for a run that has none."""
    if not run.is_relative_to(SAMPLES):
        return None
    folder = GOLDEN / run.relative_to(SAMPLES)
    return folder if folder.is_dir() else None


def _pinned(golden: Path | None, args: list[str], out: Path) -> str:
    """``profplug ARGS``'s output: the golden that test_golden_outputs.py holds it to (the
    what-if replay's wall time written as 0, a figure no check reads), else run here."""
    return golden.read_text() if golden is not None else _run(args, out)


def _compare_golden(a: Path) -> Path | None:
    """The goldens of ``compare A B`` for a shipped device/event pair (without suffix)."""
    if not a.is_relative_to(SAMPLES) or a.name != "device":
        return None
    stem = GOLDEN / "compare" / a.parent.relative_to(SAMPLES).as_posix().replace("/", "__")
    return stem if stem.with_suffix(".json").is_file() else None


def _page(args: list[str], tmp: Path, name: str, out: bool = True) -> str:
    page = tmp / f"{name}.html"
    more = ["-o", str(tmp / f"{name}.page.out")] if out else []
    assert main([*args, "--html", str(page), *more]) == 0, args
    return page.read_text()


def _stdout(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """A command that writes its table to stdout only (``ab-report``)."""
    capsys.readouterr()
    assert main(args) == 0, args
    return capsys.readouterr().out


def _id(p: tuple[Path, Path]) -> str:
    return p[0].parent.name


def _traced_outputs(a: Path, seen: figures_seen.Seen, tmp: Path) -> tuple[dict, set[int]]:
    """report and whatif of run ``a`` (traced): the figures of every format."""
    g = _golden(a)
    rep = json.loads(_pinned(g and g / "report.json", ["report", str(a), "-f", "json"],
                             tmp / "r.json"))
    dropped = figures_seen.dropped_all(rep)
    figures_seen.report_json(rep, "report json", seen)
    figures_seen.report_text(_pinned(g and g / "report.txt", ["report", str(a)], tmp / "r.txt"),
                             "report table", seen, dropped)
    figures_seen.csv_report(_pinned(g and g / "report.csv", ["report", str(a), "-f", "csv"],
                                    tmp / "r.csv"), "report csv", seen)
    page = figures_seen.page_text(_page(["report", str(a)], tmp, "report"))
    figures_seen.finding(page, "report page", seen, "", "traced", dropped)
    _page_whatif(page, "report page", seen)
    if g is None:
        wj = json.loads(_run(["whatif", str(a), "-f", "json"], tmp / "w.json"))
    else:  # what test_golden_outputs.py holds `whatif -f json` to: the report's what-if
        wj = {"step": rep["whatif"]["step"], "predicted_step": rep["whatif"]["predicted_step"],
              "whatif": rep["whatif"]}
    figures_seen.whatif_json(wj["whatif"], "whatif json", seen, "", dropped)
    if not wj["predicted_step"].get("nothing_to_drop"):
        seen.add("pred_step", wj["predicted_step"]["us"], "whatif json predicted_step")
    seen.add("run_step", wj["step"]["us"], "whatif json step")
    figures_seen.report_text(_pinned(g and g / "whatif.txt", ["whatif", str(a)], tmp / "w.txt"),
                             "whatif table", seen, dropped)
    return rep, dropped


PAGE_ROW = figures_seen.re.compile(r"(\d+) (?:step|window) (" + figures_seen.NUM + r") (" + figures_seen.NUM + r") (" + figures_seen.NUM
                         + r")% (" + figures_seen.NUM + r") ± (" + figures_seen.NUM + r"|n/a)")
PAGE_AGAINST = figures_seen.re.compile(r"(\d+) (" + figures_seen.NUM + r") ± (" + figures_seen.NUM + r")% (" + figures_seen.NUM
                             + r") (" + figures_seen.NUM + r")% (yes|no)")


def _page_whatif(text: str, where: str, seen: figures_seen.Seen, ns: str = "") -> None:
    """The page's what-if table (predicted ± band, labelled in its note) and against rows."""
    flat = figures_seen.re.sub(r"\s+", " ", text)
    if "What if: without" not in flat:
        return
    sec = flat.split("What if: without", 1)[1]
    note = sec.split("±:", 1)[1][:80] if "±:" in sec else ""
    own = "unprofiled" if ns else figures_seen.target_of(note, "traced")
    for m in PAGE_ROW.finditer(sec.split("GPU idle by cause")[0]):
        seen.add(f"{ns}pred:{m.group(1)}", m.group(5), where)
        if m.group(6) != "n/a":
            seen.add(f"{ns}band:{own}:{m.group(1)}" if not ns else f"u:band:{m.group(1)}",
                     m.group(6), where)
    if "(measured) " in flat.split("What if: without", 1)[1]:
        body = flat.split("(measured)", 1)[1]
        for m in PAGE_AGAINST.finditer(body.split("Against")[0]):
            seen.add(f"band:traced:{m.group(1)}", m.group(3), where)


@pytest.mark.parametrize("pair", PAIRS, ids=[_id(p) for p in PAIRS])
def test_every_output_of_a_pair_states_each_figure_once(pair: tuple[Path, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.chdir(ROOT)
    a, b = map(str, pair)
    seen = figures_seen.Seen()
    rep, dropped = _traced_outputs(Path(a), seen, tmp_path)
    # --against: a separate traced run
    wa = json.loads(_run(["whatif", a, "--against", b, "-f", "json"], tmp_path / "wa.json"))
    figures_seen.whatif_json(wa["whatif"], "whatif --against json", seen, "", dropped)
    figures_seen.against_json(wa["against"], "whatif --against json", seen)
    text = _run(["whatif", a, "--against", b], tmp_path / "wa.txt")
    figures_seen.report_text(text, "whatif --against table", seen, dropped)
    figures_seen.against_text(text, "whatif --against table", seen)
    page = figures_seen.page_text(_page(["whatif", a, "--against", b], tmp_path, "wa"))
    seen.check("(measured)" in page, "whatif --against --html: no against section")
    _page_whatif(page, "whatif --against page", seen)
    # --unprofiled: a step well under the traced one
    step = rep["step"]["us"]
    u = f"{0.7 * step:.1f}"
    uj = json.loads(_run(["whatif", a, "--unprofiled", u, "-f", "json"], tmp_path / "u.json"))
    figures_seen.whatif_json(uj["whatif"], "whatif --unprofiled json", seen, "u:", dropped)
    ut = _run(["whatif", a, "--unprofiled", u], tmp_path / "u.txt")
    figures_seen.finding(ut, "whatif --unprofiled table", seen, "u:", "unprofiled", set())
    figures_seen.whatif_text(ut, "whatif --unprofiled table", seen, "u:", set())
    seen.check(f"median step of {float(u):,.0f} us" not in ut,
               "whatif --unprofiled calls the given step the trace's median step")
    upage = figures_seen.page_text(_page(["whatif", a, "--unprofiled", u], tmp_path, "u"))
    figures_seen.finding(upage, "whatif --unprofiled page", seen, "u:", "unprofiled", set())
    _page_whatif(upage, "whatif --unprofiled page", seen, "u:")
    # compare
    cg = _compare_golden(pair[0])
    cj = json.loads(_pinned(cg and cg.with_suffix(".json"), ["compare", a, b, "-f", "json"],
                            tmp_path / "c.json"))
    figures_seen.report_json(cj["a"]["report"], "compare json (A's report)", seen)
    seen.add("run_step", cj["a"]["step"]["us"], "compare json")
    seen.add("b:run_step", cj["b"]["step"]["us"], "compare json")
    if cj.get("answer"):
        seen.add("pred_step", cj["answer"]["predicted_us"], "compare json answer")
        seen.add("pred_rank", str(cj["answer"]["rank"]), "compare json answer")
        seen.add("band:traced", cj["answer"]["band_pct"], "compare json answer")
    if cj.get("against"):
        figures_seen.against_json(cj["against"], "compare json against", seen)
    ct = _pinned(cg and cg.with_suffix(".txt"), ["compare", a, b], tmp_path / "c.txt")
    seen.check(figures_seen.answer_text(ct, "compare table", seen, "traced") == bool(cj.get("answer")),
               "compare table: its answer line and the JSON's answer disagree")
    figures_seen.against_text(ct, "compare table", seen)
    figures_seen.compare_steps(ct, "compare table", seen)
    cpage = figures_seen.page_text(_page(["compare", a, b], tmp_path, "c"))
    figures_seen.answer_text(cpage, "compare page", seen, "traced")
    figures_seen.finding(cpage, "compare page", seen, "", "traced", dropped)
    _page_whatif(cpage, "compare page", seen)
    bad = seen.disagreements()
    assert not bad, "\n".join(bad)


@pytest.mark.skipif(not (AB / "ab.json").is_file(), reason="the A/B sample is not here")
def test_every_output_of_the_ab_sample_states_each_figure_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    monkeypatch.chdir(ROOT)
    seen = figures_seen.Seen()
    traced = AB / "traced_device"
    _traced_outputs(traced, seen, tmp_path)
    ab = tmp_path / "ab"
    shutil.copytree(AB, ab, ignore=shutil.ignore_patterns("traced_device", "timing_paired"))
    doc = json.loads((AB / "ab.json").read_text())
    dev = doc["summary"]["device"]["median_step_us"]
    text = _stdout(["ab-report", str(ab)], capsys)
    figures_seen.ab_line(text, "ab-report table", seen)
    figures_seen.ab_json(json.loads((ab / "ab.json").read_text()), "ab-report json", seen)
    figures_seen.ab_line(figures_seen.page_text(_page(["ab-report", str(ab)], tmp_path, "ab", out=False)),
               "ab-report page", seen)
    uj = json.loads(_run(["whatif", str(traced), "--unprofiled", str(dev), "-f", "json"],
                         tmp_path / "u.json"))
    # the same prediction, its band without ab's paired CI (whatif has no ratio to carry)
    seen.add("u:pred_step", uj["whatif"]["predicted_step"]["us"], "whatif --unprofiled json")
    seen.add("uw:band:unprofiled", uj["whatif"]["predicted_step"].get("band_pct"),
             "whatif --unprofiled json")
    ut = _run(["whatif", str(traced), "--unprofiled", str(dev)], tmp_path / "u.txt")
    figures_seen.finding(ut, "whatif --unprofiled table", seen, "uw:", "unprofiled", set())
    seen.check(f"median step of {dev:,.0f} us" not in ut,
               "whatif --unprofiled calls the given step the trace's median step")
    # calibrated on the A/B itself: ab's prediction, with ab's band
    aj = json.loads(_run(["whatif", str(traced), "--unprofiled", str(ab), "-f", "json"],
                         tmp_path / "ua.json"))
    figures_seen.whatif_json(aj["whatif"], "whatif --unprofiled AB_DIR json", seen, "u:", set())
    at = _run(["whatif", str(traced), "--unprofiled", str(ab)], tmp_path / "ua.txt")
    figures_seen.finding(at, "whatif --unprofiled AB_DIR table", seen, "u:", "unprofiled", set())
    figures_seen.whatif_text(at, "whatif --unprofiled AB_DIR table", seen, "u:", set())
    cj = json.loads(_run(["compare", str(traced), str(ab), "-f", "json"], tmp_path / "c.json"))
    seen.add("u:pred_step", cj["answer"]["predicted_us"], "compare TRACED AB json")
    seen.add("u:pred_rank", str(cj["answer"]["rank"]), "compare TRACED AB json")
    seen.add("u:band:unprofiled", cj["answer"]["band_pct"], "compare TRACED AB json")
    ct = _run(["compare", str(traced), str(ab)], tmp_path / "c.txt")
    figures_seen.answer_text(ct, "compare TRACED AB table", seen, "unprofiled")
    cpage = figures_seen.page_text(_page(["compare", str(traced), str(ab)], tmp_path, "cab"))
    figures_seen.answer_text(cpage, "compare TRACED AB page", seen, "unprofiled")
    figures_seen.finding(cpage, "compare TRACED AB page", seen, "u:", "unprofiled", set())
    _page_whatif(cpage, "compare TRACED AB page", seen, "u:")
    bad = seen.disagreements()
    assert not bad, "\n".join(bad)


def test_the_check_tells_a_rounded_figure_from_another_value() -> None:
    seen = figures_seen.Seen()
    seen.add("pred_step", "3,921", "headline")
    seen.add("pred_step", 3920.543, "json")
    seen.add("band:traced", "36", "headline")
    seen.add("band:traced", "35.6", "table")
    assert seen.disagreements() == []
    seen.add("pred_step", "4,032", "another headline")
    seen.add("band:traced", "29.0", "--against")
    assert [d.split(":")[0] for d in seen.disagreements()] == ["band", "pred_step"]
