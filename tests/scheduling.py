"""The order the suite's tests are handed to pytest-xdist's workers in: the costliest modules
first on every worker, so that the long jobs run side by side from the start and the end of
the run is short tests only.

``--dist worksteal`` gives worker k the k-th of ``n`` equal, contiguous slices of the
collection, and a worker that runs out steals the second half of the longest queue left.
:func:`worker_order` lays the collection out so that each slice starts with its share of the
costly modules (costliest first, each to the slice with the least cost so far; largest
processing time first), then the cheap tests fill every slice to its size. A module's tests
stay together and in their order, so its module-scoped fixtures are made once. Modules listed
``together`` (they load the same thing once per process: Megatron-Core imported in the
worker, the forkserver of tests/runtime/_dist.py) go to one slice as one unit, costs added,
in the listed order. Costs and groups: ``tests/data/module_costs.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
COSTS = Path(__file__).resolve().parent / "data" / "module_costs.json"
# a module not in COSTS: one under tests/runtime/ starts real jobs (torchrun, gloo ranks)
DEFAULT_BY_FOLDER = {"tests/runtime/": 20.0}


def module_costs(path: Path = COSTS) -> dict[str, float]:
    """Module path (``tests/runtime/test_ab.py``) -> its cost, from ``path``."""
    return {k: float(v) for k, v in json.loads(path.read_text())["modules"].items()}


def modules_together(path: Path = COSTS) -> list[list[str]]:
    """The groups of modules one worker runs back to back, from ``path``."""
    return [list(g) for g in json.loads(path.read_text()).get("together", [])]


def cost_of(module: str, costs: dict[str, float]) -> float:
    """``module``'s cost: its figure, else its folder's default, else 0."""
    if module in costs:
        return costs[module]
    return next((c for folder, c in DEFAULT_BY_FOLDER.items() if module.startswith(folder)), 0.0)


def slice_sizes(n_items: int, workers: int) -> list[int]:
    """How many items worksteal's first distribution gives each worker."""
    sizes, left = [], n_items
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    return sizes


def worker_order(items: Sequence[T], workers: int, module: Callable[[T], str],
                 costs: dict[str, float], together: Sequence[Sequence[str]] = ()) -> list[T]:
    """``items`` (in collection order) reordered for ``workers`` workers: see above."""
    by_module: dict[str, list[T]] = {}
    for it in items:
        by_module.setdefault(module(it), []).append(it)
    # a unit: one module, or the collected modules of a `together` group (in the group's
    # order), at its first member's place in the collection
    group_of = {m: [x for x in listed if x in by_module] for listed in together for m in listed}
    units: dict[str, list[str]] = {}
    for m in by_module:
        members = group_of.get(m, [m])
        units.setdefault(members[0], members)
    cost = {u: sum(cost_of(m, costs) for m in ms) for u, ms in units.items()}
    costly = sorted((u for u in units if cost[u] > 0),
                    key=lambda u: -cost[u])  # stable: collection order on ties
    slices: list[list[T]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for u in costly:
        k = min(range(workers), key=lambda k: load[k])
        slices[k] += [it for m in units[u] for it in by_module[m]]
        load[k] += cost[u]
    cheap = [it for u, ms in units.items() if cost[u] <= 0 for m in ms for it in by_module[m]]
    out: list[T] = []
    for k, size in enumerate(slice_sizes(len(items), workers)):
        take = len(cheap) if k == workers - 1 else max(0, size - len(slices[k]))
        out += slices[k] + cheap[:take]
        del cheap[:take]
    return out
