"""The one per-step statistic: given steps with a planted stall, the basis ignores it."""

from __future__ import annotations

import numpy as np
from profplug.analyzers.steps import stats


def test_planted_long_step_is_an_outlier_and_leaves_the_median() -> None:
    steps = [6880.0, 6878.0, 6881.0, 6810.0, 385_290.0, 6900.0, 6850.0, 6870.0]
    s = stats.summarize(steps)
    assert s.outliers == [4]
    assert s.value == float(np.median([x for x in steps if x != 385_290.0]))
    assert s.mean > 50_000  # the mean is kept, under its own name
    assert s.to_dict()["statistic"] == "median"


def test_near_identical_steps_call_no_outlier() -> None:
    steps = [100.0] * 20 + [101.5]
    assert not stats.outlier_mask(steps).any()  # 1.5% off: inside the 2% floor x k


def test_too_few_steps_call_no_outlier() -> None:
    assert not stats.outlier_mask([1.0, 1.0, 1000.0]).any()


def test_empty() -> None:
    assert stats.summarize([]).n == 0
    assert stats.center([]) == 0.0


def test_center_rows_is_center_of_each_row() -> None:
    # given a table of per-step series (one row per cause) and a basis without step 2
    table = np.array([[3.0, 1.0, 100.0, 2.0, 5.0], [0.0, 0.0, 9.0, 4.0, 4.0],
                      [7.0, 7.0, 7.0, 7.0, 7.0]])
    basis = np.array([True, True, False, True, True])
    # when centred row by row in one call
    got = stats.center_rows(table, basis)
    # then each row's median over the basis: (2+3)/2, (0+4)/2, 7 -- as center() gives
    assert got.tolist() == [2.5, 2.0, 7.0]
    assert got.tolist() == [stats.center(r, basis) for r in table]
    # and an odd basis takes the middle value; an empty basis, all steps (as center)
    assert stats.center_rows(table, np.array([1, 1, 0, 1, 0], bool)).tolist() == [2.0, 0.0, 7.0]
    assert stats.center_rows(table, np.zeros(5, bool)).tolist() == [3.0, 4.0, 7.0]
    assert stats.median(np.array([4, 1, 3, 2], dtype=np.int64)) == 2.5
