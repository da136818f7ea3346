"""The switched design (``profplug ab --switch-every``): the policies take turns in blocks of
steps inside each run, the first steps after a switch are discarded, each run gives one
ratio and the runs a t-interval over their log ratios; a step whose outputs differ is named
with the policy that ran it."""

from __future__ import annotations

import json
import math

import pytest
from profplug.analyzers.ab import analyze_ab
from profplug.analyzers.ab.plan import switched_orders
from profplug.analyzers.ab.switched import labelled_steps, log_ratio_ci, run_centers
from profplug.analyzers.render.registry import render_text
from synth import ab_run

LABELS = ["device", "event"]


def _switched(k: int, order: list[str], speed: float, every: int = 10, n: int = 60,
              first: int = 20) -> dict:
    """Steps: device 1000 us x speed, event 900; the first 2 of each block 3x slower."""
    steps = []
    for i in range(first, first + n):
        label = order[(i // every) % len(order)]
        t = 1000.0 * speed * (0.9 if label == "event" else 1.0)
        steps.append(t * (3.0 if i % every < 2 else 1.0))
    run = ab_run(k, k, "+".join(order), steps, 0, block_order=order, switch_every=every)
    run["ranks"][0]["first_step"] = first
    return run


def test_switched_runs_compare_the_policies_inside_each_run() -> None:
    runs = [_switched(k, o, s) for k, (o, s) in enumerate(
        zip(switched_orders(LABELS, 3), (0.6, 1.4, 1.0), strict=True))]
    steps = labelled_steps(runs[1])
    assert [lb for _, lb, _ in steps[:11]] == ["event"] * 10 + ["device"]
    assert run_centers(runs[1]) == {"event": (1260.0, 24), "device": (1400.0, 24)}
    res = analyze_ab(runs, policies=LABELS, rounds=3, resamples=500)
    ev = res.policy("event")
    assert res.design == "switched" and res.switch_every == 10
    assert ev.round_medians_us == [540.0, 1260.0, 900.0]
    assert ev.speedup_vs_device == pytest.approx(1 / 0.9, abs=1e-4)
    assert ev.resolved and ev.verdict.startswith("event: 1.11x faster than device")
    assert "3 switched runs" in ev.verdict and "switched every 10 steps" in res.verdict
    assert res.after_switch["event"][:3] == [3.0, 3.0, 1.0]  # the transient, measured
    doc = json.loads(render_text(res, "json"))
    assert doc["design"] == "switched" and doc["discard_after_switch"] == 2


def test_the_t_interval_over_runs_log_ratios() -> None:
    sp, lo, hi, n = log_ratio_ci([1.1, 1.2, 1.15])
    r = [math.log(x) for x in (1.1, 1.2, 1.15)]
    m = sum(r) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in r) / 2)
    assert n == 3 and sp == pytest.approx(math.exp(m))
    assert lo == pytest.approx(math.exp(m - 4.303 * sd / math.sqrt(3)))
    assert hi == pytest.approx(math.exp(m + 4.303 * sd / math.sqrt(3)))
    assert log_ratio_ci([1.1, 1.2])[1:3] == (None, None)


def test_a_switched_mismatch_names_the_policy_that_ran_the_step_in_each_run() -> None:
    runs = [_switched(k, o, 1.0) for k, o in enumerate(switched_orders(LABELS, 2))]
    for r in runs:
        r["ranks"][0] |= {"digest_calls": 20, "step_digests": [f"s{i}" for i in range(20)]}
    runs[1]["ranks"][0]["step_digests"][7] = "bad"  # step 7: block 0, event in run 1
    res = analyze_ab(runs, policies=LABELS, rounds=2, resamples=100)
    (m,) = res.outputs.mismatches
    assert (m.run, m.step, m.policy, m.reference_policy) == (1, 7, "event", "device")
    assert res.exit_code() == 1
