"""The order the suite's tests are handed to pytest-xdist's workers (tests/scheduling.py), on
a made-up collection with known costs."""

from __future__ import annotations

from pathlib import Path

from scheduling import (
    DEFAULT_BY_FOLDER,
    cost_of,
    module_costs,
    modules_together,
    slice_sizes,
    worker_order,
)

COSTS = {"a.py": 50.0, "b.py": 30.0, "c.py": 25.0}


def collection() -> list[str]:
    """Tests ``module::n``: a cheap module, the costly ones, and another cheap one."""
    sizes = {"u.py": 6, "a.py": 2, "b.py": 3, "c.py": 1, "v.py": 4}
    return [f"{m}::{n}" for m, k in sizes.items() for n in range(k)]


def module(test: str) -> str:
    return test.split("::")[0]


def test_each_worker_starts_with_its_share_of_the_costly_modules() -> None:
    order = worker_order(collection(), 2, module, COSTS)
    size0 = slice_sizes(len(order), 2)[0]
    first, second = order[:size0], order[size0:]
    # the costliest module (50) opens worker 0's slice; the next two go to the less loaded
    # worker 1 (30, then 25: 55 against 50), costliest first; cheap tests fill both slices
    assert [module(t) for t in first[:2]] == ["a.py", "a.py"]
    assert [module(t) for t in second[:4]] == ["b.py", "b.py", "b.py", "c.py"]
    assert {module(t) for t in first[2:]} | {module(t) for t in second[4:]} == {"u.py", "v.py"}
    assert sorted(order) == sorted(collection())  # nothing lost, nothing repeated


def test_a_modules_tests_stay_together_and_in_order() -> None:
    order = worker_order(collection(), 3, module, COSTS)
    for m in ("a.py", "b.py", "c.py"):
        at = [i for i, t in enumerate(order) if module(t) == m]
        assert at == list(range(at[0], at[0] + len(at)))
        assert [order[i] for i in at] == [t for t in collection() if module(t) == m]


def test_modules_listed_together_run_on_one_worker_in_their_order_costs_added() -> None:
    # given c.py (25) and u.py (cheap) together, listed u.py first, and a listed module that
    # is not collected
    order = worker_order(collection(), 2, module, COSTS, [["u.py", "c.py", "gone.py"]])
    # then the unit costs 25: a.py (50) opens worker 0's slice, b.py (30) worker 1's, and the
    # unit follows b.py (30 against 50), u.py then c.py; v.py, the one cheap module left,
    # fills worker 0's slice
    assert [module(t) for t in order] == (["a.py"] * 2 + ["v.py"] * 4 + ["b.py"] * 3
                                          + ["u.py"] * 6 + ["c.py"])
    assert sorted(order) == sorted(collection())


def test_worksteals_slices_are_equal_in_size() -> None:
    assert slice_sizes(10, 3) == [3, 3, 4] and sum(slice_sizes(1397, 2)) == 1397


def test_one_worker_runs_the_costly_modules_first() -> None:
    order = worker_order(collection(), 1, module, COSTS)
    assert [module(t) for t in order[:6]] == ["a.py"] * 2 + ["b.py"] * 3 + ["c.py"]


def test_an_unlisted_runtime_module_is_costly_and_the_shipped_costs_are_read() -> None:
    assert cost_of("tests/runtime/test_new_jobs.py", {}) == DEFAULT_BY_FOLDER["tests/runtime/"]
    assert cost_of("tests/unit/test_new.py", {}) == 0.0
    assert module_costs()["tests/runtime/test_ab.py"] > 0


def test_every_costed_module_exists() -> None:
    """A moved or renamed module keeps its cost only under its new path: a stale key would
    leave the module unscheduled among the cheap ones."""
    root = Path(__file__).resolve().parents[2]
    assert [m for m in module_costs() if not (root / m).is_file()] == []
    listed = [m for group in modules_together() for m in group]
    assert listed and [m for m in listed if not (root / m).is_file()] == []
