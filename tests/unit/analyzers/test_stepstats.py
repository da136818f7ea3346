"""The one per-step statistic: given steps with a planted stall, the basis ignores it."""

from __future__ import annotations

import numpy as np
from profplug.analyzers import stepstats


def test_planted_long_step_is_an_outlier_and_leaves_the_median() -> None:
    steps = [6880.0, 6878.0, 6881.0, 6810.0, 385_290.0, 6900.0, 6850.0, 6870.0]
    s = stepstats.summarize(steps)
    assert s.outliers == [4]
    assert s.value == float(np.median([x for x in steps if x != 385_290.0]))
    assert s.mean > 50_000  # the mean is kept, under its own name
    assert s.to_dict()["statistic"] == "median"


def test_near_identical_steps_call_no_outlier() -> None:
    steps = [100.0] * 20 + [101.5]
    assert not stepstats.outlier_mask(steps).any()  # 1.5% off: inside the 2% floor x k


def test_too_few_steps_call_no_outlier() -> None:
    assert not stepstats.outlier_mask([1.0, 1.0, 1000.0]).any()


def test_empty() -> None:
    assert stepstats.summarize([]).n == 0
    assert stepstats.center([]) == 0.0
