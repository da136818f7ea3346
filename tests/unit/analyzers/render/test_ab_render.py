"""The A/B's table and HTML page (synthetic runs): 80 columns, every section, escaping."""

from __future__ import annotations

import re

from profplug.analyzers.ab import AbResult
from profplug.analyzers.render.ab_html import plot_data
from profplug.analyzers.render.registry import formats, render_text
from synth import ab_result, ab_runs


def test_formats_are_table_and_json() -> None:
    assert formats(AbResult) == ["table", "json"]


def test_table_fits_80_columns_and_holds_every_part() -> None:
    res = ab_result(ab_runs(failed={4}))
    res.warnings.append("a warning long enough to need wrapping " * 4)
    text = render_text(res, "table")
    assert max(len(line) for line in text.splitlines()) <= 80
    for part in ("profplug ab: device vs event vs none, 3 rounds, interleaved",
                 "9 runs, 1 failed; steps 2..21 of each run; step time: CUDA events",
                 "device     3/3", "event      2/3", "rank policy", "outputs: identical",
                 "verdict: event: ", "verdict: none: ", "failed: run 4", "warning: a warning"):
        assert part in text, part


def test_html_page_has_its_plots_and_escapes_every_string() -> None:
    res = ab_result(ab_runs(failed={4}))
    res.command = ["python", "<script>alert(1)</script>"]
    res.warnings.append('<img src=x onerror="alert(2)">')
    page = render_text(res, "html")
    for pid in ("ab-plot-runs", "ab-plot-ci", "ab-plot-speedup", "ab-plot-hist",
                "ab-summary", "ab-runs-table", "ab-outputs"):
        assert page.count(f'id="{pid}"') == 1, pid
    assert "<script" not in page  # no script at all
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<img" not in page
    data = plot_data(res)
    assert [r["label"] for r in data["runs"]][:3] == ["r0 device", "r0 event", "r0 none"]
    assert data["runs"][4]["ok"] is False and len(data["runs"][0]["q"]) == 5
    assert sum(data["hist"]["event"]) == 2 * 20  # two ok rounds of 20 steps
    assert data["whatif"] is None
    ev = next(s for s in data["summary"] if s["policy"] == "event")
    assert [k for k, _ in ev["round_ratios"]] == [0, 2]  # round 1's event run failed


def test_the_svgs_draw_a_box_per_run_a_row_per_policy_and_no_ci_without_rounds() -> None:
    res = ab_result(ab_runs(rounds=4), rounds=4)
    page = render_text(res, "html")
    runs = re.search(r'<svg id="ab-plot-runs".*?</svg>', page, re.S).group(0)
    assert runs.count("<rect") == 12 and runs.count('data-policy="event"') == 4
    ci = re.search(r'<svg id="ab-plot-ci".*?</svg>', page, re.S).group(0)
    assert ci.count('class="ci"') == 3 and ci.count("<circle") == 12
    sp = re.search(r'<svg id="ab-plot-speedup".*?</svg>', page, re.S).group(0)
    assert sp.count('class="ci"') == 2 and "no difference" in sp
    few = render_text(ab_result(ab_runs(rounds=2), rounds=2), "html")
    ci2 = re.search(r'<svg id="ab-plot-ci".*?</svg>', few, re.S).group(0)
    assert 'class="ci"' not in ci2 and "too few rounds for a CI" in ci2


def test_a_hostile_policy_or_label_is_escaped_in_the_svgs() -> None:
    runs = ab_runs(policies=["device", "event"])
    for r in runs:
        if r["policy"] == "event":
            r["policy"] = 'ev"><script>x</script>'
    res = ab_result(runs, policies=["device", 'ev"><script>x</script>'])
    page = render_text(res, "html")
    assert "<script" not in page and "&lt;script&gt;" in page


def test_the_page_of_a_long_ab_stays_small() -> None:
    """3 policies x 30 rounds x 2 ranks x 200 steps: the page's size follows the runs and
    bins, not the steps (with a plotting library inlined it was ~5 MB)."""
    res = ab_result(ab_runs(rounds=30, steps=200), rounds=30)
    size = len(render_text(res, "html").encode())
    assert size < 150_000, size


def test_plot_data_carries_the_whatif_lines() -> None:
    res = ab_result(ab_runs())
    res.whatif = {"predicted_step_us": 1000.0, "recorded_step_us": 2400.0,
                  "measured_policy": "event", "predicted_band_us": [900.0, 1100.0],
                  "traced": {"predicted_step_us": 1200.0}}
    assert plot_data(res)["whatif"] == {"predicted": 1000.0, "band": [900.0, 1100.0],
                                        "traced": 1200.0, "recorded": 2400.0,
                                        "policy": "event"}
