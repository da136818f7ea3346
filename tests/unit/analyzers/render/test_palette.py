"""One colour per quantity across the report, compare and ab pages: every legend swatch
(``data-key`` and its colour) and every coloured part of a figure (``data-part``) agree with
``render/palette.py``, and no colour stands for two quantities, nor for a quantity and an
identity (a rank, a policy)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from profplug.analyzers.render.palette import COLORS, RANK_COLORS, policy_color
from profplug.analyzers.stalls.gaps import CAUSES

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

SAMPLES = Path(__file__).resolve().parents[4] / "sample_traces"
KEY = re.compile(r'<span class="key" data-key="([^"]+)" data-color="([^"]+)"><i style="'
                 r'background:([^"]+)">')
PART = re.compile(r'fill="(#[0-9a-f]{6})" data-part="([^"]+)"')
IDENT = re.compile(r'<span class="key" data-id="[^"]*"><i style="background:([^"]+)">')


def _pages(tmp: Path) -> dict[str, str]:
    dev, evt = SAMPLES / "pp2_infer_kineto/device", SAMPLES / "pp2_infer_kineto/event"
    ab = tmp / "ab"
    shutil.copytree(SAMPLES / "ab_h200_decode_loop", ab, ignore=shutil.ignore_patterns(
        "traced_device", "timing_paired"))
    assert main(["report", str(dev), "--html", str(tmp / "report.html"), "-o",
                 str(tmp / "r.txt")]) == 0
    assert main(["compare", str(dev), str(evt), "--html", str(tmp / "compare.html"), "-o",
                 str(tmp / "c.txt")]) == 0
    main(["ab-report", str(ab), "--html", str(tmp / "ab.html")])
    return {n: (tmp / f"{n}.html").read_text() for n in ("report", "compare", "ab")}


def test_one_colour_per_quantity_across_pages(tmp_path: Path) -> None:
    pages = _pages(tmp_path)
    colour_of: dict[str, set[str]] = {}
    key_of: dict[str, set[str]] = {}
    for name, page in pages.items():
        keys = KEY.findall(page)
        assert keys or name == "ab", name  # every page with figures has legends
        for key, data_colour, swatch in keys:
            assert data_colour == swatch == COLORS[key], (name, key)
            colour_of.setdefault(key, set()).add(swatch)
            key_of.setdefault(swatch, set()).add(key)
        for colour, part in PART.findall(page):  # the bars' parts
            assert colour == COLORS[part], (name, part)
            assert part in {k for k, _, _ in keys}, f"{name}: {part} has no legend"
    # then each quantity has one colour, and each colour one quantity (transfer is comm's
    # part that moves data, so they share one)
    assert all(len(c) == 1 for c in colour_of.values()), colour_of
    assert all(len(k - {"comm"}) <= 1 for k in key_of.values()), key_of
    # the swimlane's NCCL peer wait, the bars' peer wait and the timeline's: the same
    # colour on report and compare pages. The timeline (drawn by the page's script) shows
    # the GPU-time quantities the bars show, each in its own colour, with a legend: NCCL
    # peer wait is never drawn inside another quantity's colour ("busy")
    for name in ("report", "compare"):
        page = pages[name]
        assert 'data-key="peer_wait"' in page and 'data-part="peer_wait"' in page
        data = json.loads(re.search(r'id="profplug-data">(.*?)</script>', page, re.S)[1])
        assert data["colors"] == COLORS  # the script's colours are the palette's
        bars = {p for _, p in PART.findall(page.split('<svg id="bars"')[1].split("</svg>")[0])}
        gpu_time = bars - set(CAUSES)
        assert gpu_time == {"compute", "transfer", "peer_wait"}, (name, bars)
        timeline = page.split("<h2>Timeline</h2>")[1].split('<div class="tl-tools">')[0]
        legend = {k for k, _, _ in KEY.findall(timeline)}
        assert legend - set(CAUSES) == gpu_time, (name, legend)  # its legend
        assert set(data["timeline"]["parts"]) == gpu_time  # what the script draws
        drawn = data["timeline"]["spans"]["peer_wait"]
        assert sum(e - s for s, e in zip(drawn["s"], drawn["e"], strict=True)) > 0
    # identities (ranks, policies) never take a quantity's colour
    quantity = set(COLORS.values())
    assert not quantity & set(RANK_COLORS)
    assert all(policy_color(p) in quantity for p in ("device", "event", "none"))  # own keys
    for page in pages.values():
        for colour in IDENT.findall(page):
            assert colour in set(RANK_COLORS) | {policy_color(p) for p in
                                                 ("device", "event", "none")}, colour
    assert policy_color("device") != COLORS["device_sync"]
