"""Pages stay readable with real data: an outlier step does not set the axis (it is marked
at the edge with its value), what-if labels do not overlap, no colour of a policy, a rank
and a cause is close to another's, every page is titled after its command and shows no
Python ``None``."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.render.ab_svg import CHAR_W, place_labels
from profplug.analyzers.render.compare_html import edge_marks, inliers, scale
from profplug.analyzers.render.crossrank_svg import inlier_top
from profplug.analyzers.render.palette import COLORS, RANK_COLORS, rank_style, run_keys

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

SAMPLES = Path(__file__).resolve().parents[4] / "sample_traces"
STEPS = np.array([7000.0, 7100, 6900, 7050, 7200, 6950, 7020, 385_000])


def _lab(c: str) -> tuple[float, float, float]:
    lin = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4
           for v in (int(c[i:i + 2], 16) / 255 for i in (1, 3, 5))]
    xyz = [sum(m * v for m, v in zip(row, lin, strict=True)) / n for row, n in zip(
        ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505)),
        (0.95047, 1.0, 1.08883), strict=True)]
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def distance(c1: str, c2: str) -> float:
    """CIE76 distance, halved for two saturated colours of one hue and close lightness."""
    (l1, a1, b1), (l2, a2, b2) = _lab(c1), _lab(c2)
    d = math.dist((l1, a1, b1), (l2, a2, b2))
    if math.hypot(a1, b1) > 20 and math.hypot(a2, b2) > 20 and abs(l1 - l2) < 25:
        dh = abs(math.degrees(math.atan2(b1, a1) - math.atan2(b2, a2))) % 360
        if min(dh, 360 - dh) < 25:
            d /= 2
    return d


def test_policy_rank_and_cause_colours_are_far_apart() -> None:
    quantities = {k: v for k, v in COLORS.items()
                  if not k.startswith("policy_") and k not in ("handoff", "path")}
    policies = {k: v for k, v in COLORS.items() if k.startswith("policy_")}
    groups = [quantities, policies, dict(enumerate(RANK_COLORS))]
    for i, g in enumerate(groups):
        for h in groups[i + 1:]:
            for k1, c1 in g.items():
                for k2, c2 in h.items():
                    assert distance(c1, c2) >= 23, (k1, c1, k2, c2)
    assert distance(COLORS["compute"], rank_style(0)[0]) >= 23  # the "same blue"
    assert rank_style(len(RANK_COLORS))[1]  # past the colours: dashed


def test_compare_runs_take_their_policies_colours() -> None:
    assert run_keys("device", "event") == ("policy_device", "policy_event")
    assert run_keys("device", "device") == ("run_a", "run_b")
    assert run_keys(None, "event") == ("run_a", "run_b")


def test_outlier_step_does_not_set_the_axis_and_is_marked_with_its_value() -> None:
    lo, hi, sx = scale(inliers(STEPS).tolist(), right=130)
    assert hi < 8000  # the axis spans the 7 ms steps, not the 385 ms one
    marks = edge_marks(20, STEPS, lo, hi, sx, "#000000", "A step")
    assert 'data-side="hi" data-count="1"' in marks and "385,000 us" in marks
    assert inlier_top([[*STEPS.tolist(), None]]) < 8000


def test_whatif_labels_do_not_overlap() -> None:
    for xs in ([185, 728, 817], [300, 310, 320], [700, 705, 800]):
        texts = ["what-if 455.5", "what-if, traced host 1,191.5", "traced device run 1,312.0"]
        got = place_labels(list(zip(xs, texts, strict=True)), 90, 810)
        boxes = [(row, *((x, x + CHAR_W * len(t)) if a == "start" else
                         (x - CHAR_W * len(t), x)))
                 for x, t, (row, a) in zip(xs, texts, got, strict=True)]
        for i, (r, a0, a1) in enumerate(boxes):
            assert a0 >= 0 and a1 <= 830, (xs, got)
            for j, (r2, b0, b1) in enumerate(boxes):
                if i != j and r == r2:
                    assert a1 <= b0 or b1 <= a0, (xs, got)  # two labels of one row
                if i != j and got[j][0] < r:  # a line from above runs through this row
                    assert not a0 <= xs[j] <= a1, (xs, got)


def test_every_page_is_titled_after_its_command_and_shows_no_none(tmp_path: Path) -> None:
    dev, evt = SAMPLES / "pp2_infer_kineto/device", SAMPLES / "pp2_infer_kineto/event"
    ab = tmp_path / "ab"
    shutil.copytree(SAMPLES / "ab_h200_decode_loop", ab, ignore=shutil.ignore_patterns(
        "timing_paired"))
    runs = {"report": ["report", str(dev)], "whatif": ["whatif", str(dev)],
            "compare": ["compare", str(dev), str(evt)],
            "ab": ["ab-report", str(ab)]}
    for name, argv in runs.items():
        page = tmp_path / f"{name}.html"
        out = [] if name == "ab" else ["-o", str(tmp_path / f"{name}.txt")]
        main([*argv, "--html", str(page), *out])
        text = page.read_text()
        title = re.search(r"<title>([^<]*)</title>", text)[1]
        assert title.startswith(f"profplug {name}"), (name, title)
        body = re.sub(r"<script.*?</script>", "", text, flags=re.S)
        assert not re.search(r"\bNone\b", body), (name, re.search(r".{60}\bNone\b.{20}", body))
