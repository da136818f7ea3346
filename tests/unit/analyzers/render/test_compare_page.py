"""The compare page says what the terminal says: the segment table of A's what-if lined up
with B, one base for every percentage of a step difference, and a rank's synchronize count
per step (never the ranks' sum)."""

from __future__ import annotations

import html as htmllib
import io
import re
from pathlib import Path

import pytest
import sample_cache
from profplug.analyzers.compare.answer import device_syncs_per_step, syncs_words
from profplug.analyzers.compare.reports import compare
from profplug.analyzers.render.registry import render
from synth import write_run

from profplug.cli.main import main

TAGS = re.compile(r"<[^>]+>")


def _text(html: str) -> str:
    return " ".join(htmllib.unescape(TAGS.sub(" ", html)).split())


def test_compare_page_holds_the_segment_table_the_terminal_prints(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # given the synthetic device and event runs, compared with A's what-if
    dev, evt = write_run(tmp_path, "device"), write_run(tmp_path, "event")
    page = tmp_path / "c.html"
    assert main(["compare", str(dev), str(evt), "--whatif", "--html", str(page)]) == 0
    out = capsys.readouterr().out
    html = page.read_text()
    # then the terminal's segment rows (predicted, measured, diff, where) are the page's,
    # rank by rank and in the same order
    printed = re.findall(r"^ +([\d,.]+) +([\d,.]+) +([+-][\d,.]+)  (.+)$", out, re.M)
    assert printed, out
    section = html[html.index('<section id="against-section">'):]
    section = section[:section.index("</section>")]
    shown = [tuple(TAGS.sub("", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row))
             for table in re.findall(r'<table class="segments".*?</table>', section)
             for row in re.findall(r"<tbody>(.*?)</tbody>", table)[0].split("</tr>") if row]
    assert shown == [tuple(x) for x in printed]
    # and each rank's finding and its step row
    for finding in re.findall(r"^(rank \d, .+?)$", out, re.M):
        assert _text(finding)[:40] in _text(section)
    assert section.count('<tr data-rank="') == 2


def test_compare_page_gives_every_step_difference_percentage_one_base() -> None:
    # given the shipped decode loop compared event -> device (B, the device run, is slower)
    evt = sample_cache.stalls("pp2_infer_kineto/event")
    dev = sample_cache.stalls("pp2_infer_kineto/device")
    cmp = compare(evt, dev, "event", "device")
    out = io.StringIO()
    render(cmp, "html", out)
    text = _text(out.getvalue())
    # then every percentage of the step difference is of the device run's step, the
    # pipeline's and each rank's, and the verdict table's column is the verdicts' figure
    bases = re.findall(r"[+-]?([\d.]+)% of (\S+?)'s step", text)
    assert bases and {b for _, b in bases} == {"device"}
    assert "% of A" not in text and "% of B" not in text
    assert cmp.noise is not None
    assert f"{cmp.noise.diff_pct:+.1f}% of device's step" in text
    for rc in cmp.ranks:
        assert rc.diff_pct is not None and f"({rc.diff_pct:.1f}% of device's step)" in text
        cell = re.search(rf'<tr data-rank="{rc.rank}">.*?</tr>', out.getvalue())
        assert cell is not None and f">{rc.diff_pct:,.1f}<" in cell.group(0)


def test_a_runs_synchronizes_per_step_are_a_ranks_not_the_sum() -> None:
    # given the decode loop's device run (41 device-wide synchronizes in 20 steps on each
    # of its 2 ranks) as B, against a device run with a what-if as A
    a = sample_cache.report("pp2_infer_kineto/device")
    b = sample_cache.stalls("pp2_infer_repeats/kineto2/device")
    per = device_syncs_per_step(b.ranks)
    assert len(per) == 2 and len({round(v, 1) for v in per.values()}) == 1
    cmp = compare(a, b, "device", "again")
    # then the answer's caveat counts a rank's synchronizes per step, on each rank
    assert cmp.answer is not None
    one = f"{max(per.values()):.1f}"
    assert f"B still makes {one} device-wide synchronizes per step on each rank" in (
        cmp.answer.caveat)
    assert f"{sum(per.values()):.1f} device-wide" not in cmp.answer.caveat


def test_synchronize_counts_name_the_rank_where_ranks_differ() -> None:
    assert syncs_words({0: 2.05, 1: 1.0}) == (
        "2.0 device-wide synchronizes per step on rank 0 (the most of 2 ranks)")
    assert syncs_words({3: 1.5}) == "1.5 device-wide synchronizes per step"
