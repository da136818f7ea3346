"""Real browser: the compare page leads with the answer. Chromium reads its first figure from
the DOM: A's predicted step, B's measured step and the error, equal to the JSON's answer,
before any per-rank table."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from profplug.cli.main import main

pytestmark = [pytest.mark.browser, pytest.mark.samples_read_once]
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def test_compare_page_first_figure_is_the_answer(chromium: Any, tmp_path: Path
                                                 ) -> None:
    # given `profplug compare device event --whatif` on the shipped decode-loop runs
    a, b = SAMPLES / "pp2_infer_kineto/device", SAMPLES / "pp2_infer_kineto/event"
    page, doc = tmp_path / "compare.html", tmp_path / "compare.json"
    assert main(["compare", str(a), str(b), "--whatif", "--html", str(page), "-f", "json",
                 "-o", str(doc)]) == 0
    answer = json.loads(doc.read_text())["answer"]
    # when Chromium has loaded the page
    dom = chromium.open(page, tmp_path, "--dump-dom").stdout
    # then its first figure is the answer: predicted vs measured and the error, as in the JSON
    fig = re.search(r"<figure ([^>]*)>", dom)
    assert fig is not None and 'id="answer-figure"' in fig.group(1)
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', fig.group(1)))
    assert float(attrs["predicted-us"]) == pytest.approx(answer["predicted_us"], abs=1e-3)
    assert float(attrs["measured-us"]) == pytest.approx(answer["measured_us"], abs=1e-3)
    assert float(attrs["error-pct"]) == pytest.approx(answer["error_pct"], abs=1e-3)
    # and the sentence is the page's headline, before the per-rank tables
    line = re.search(r'<p id="answer-line">(.*?)</p>', dom, re.S)
    assert line is not None and html.unescape(line.group(1)) == answer["sentence"]
    assert re.match(r"device's what-if predicted [\d,]+ us/step \(±\d+%: [\d,]+-[\d,]+\); "
                    r"event measured [\d,]+ us/step \(step spread [\d,]+-[\d,]+\): error "
                    r"[+-]\d+\.\d%$", answer["sentence"]), answer["sentence"]
    assert dom.index('id="answer-figure"') < dom.index('id="verdicts"') < dom.index(
        'id="summary"')
    # the figure has its legend; the header counts ranks per run
    legend = dom[dom.index('id="answer-figure"'):dom.index("</figure>")]
    assert 'data-key="predicted"' in legend and 'data-key="measured"' in legend
    assert "A = device: 2 ranks (kineto) · B = event: 2 ranks (kineto)" in html.unescape(dom)
    assert "rank(s)" not in dom
    # and the page agrees with itself and the JSON: each run's line is its step (the run's
    # step, `step.us`), B's the measured step of the answer
    medians = [float(x) for x in re.findall(r'data-median-us="([\d.]+)"', legend)]
    d = json.loads(doc.read_text())
    assert medians == pytest.approx([d["a"]["step"]["us"], answer["measured_us"]], abs=1e-3)
    assert d["b"]["step"]["us"] == pytest.approx(answer["measured_us"], abs=1e-3)


def test_compare_with_ab_page_first_figure(chromium: Any, tmp_path: Path
                                           ) -> None:
    # given `profplug compare TRACED AB_DIR` (B measured by profplug ab: its CI)
    ab = SAMPLES / "ab_h200_decode_loop"
    page, doc = tmp_path / "cab.html", tmp_path / "cab.json"
    assert main(["compare", str(ab / "traced_device"), str(ab), "--html", str(page), "-f",
                 "json", "-o", str(doc)]) == 0
    answer = json.loads(doc.read_text())["answer"]
    dom = chromium.open(page, tmp_path, "--dump-dom").stdout
    # then the first figure is the prediction against ab's CI (the error as the JSON has it:
    # -1.2% with the merged code of 2026-12-01), measured inside the band
    fig = re.search(r"<figure ([^>]*)>", dom)
    assert fig is not None and 'id="answer-figure"' in fig.group(1)
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', fig.group(1)))
    assert float(attrs["predicted-us"]) == pytest.approx(answer["predicted_us"], abs=1e-3)
    assert float(attrs["measured-us"]) == pytest.approx(461.04, abs=1e-3)
    err = 100.0 * (answer["predicted_us"] - 461.04) / 461.04
    assert float(attrs["error-pct"]) == pytest.approx(err, abs=1e-3)
    assert answer["error_pct"] == pytest.approx(err, abs=1e-3)
    line = re.search(r'<p id="answer-line">(.*?)</p>', dom, re.S)
    assert line is not None and (f"(95% CI over 5 rounds 452-465): error {err:+.1f}%"
                                 in " ".join(html.unescape(line.group(1)).split()))
    assert dom.index('id="answer-figure"') < dom.index('id="summary"')
