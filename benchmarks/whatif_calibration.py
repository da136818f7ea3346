"""``--unprofiled``'s calibration, alternatives tried against ``profplug ab`` (issue 16).

    python3 benchmarks/whatif_calibration.py GRID... --ab AB [--shapes all|tune|held-out]

For every traced device run of the grid (``whatif_grid.py capture``) and every form of the
profiler's cost, fit the form's one parameter so that the trace, nothing dropped, replays at
ab's device median, predict without the device-wide synchronizes, and set the median
prediction over the repeats against ab's event median:

- ``proportional`` (what ``whatif_unprofiled`` does): host gaps and non-waiting calls times
  ``s``;
- ``gaps``: host gaps times ``s``, calls as traced (the profiler's cost is in the Python
  between calls: observers, ``record_function``);
- ``per-call``: every top-level CUDA call's preceding host gap less a fixed ``k`` ns (a cost
  per call, CUPTI's callbacks, not proportional to the host's work; floored at 0).

Prints the error per (shape, profiler) and each form's summed |error|.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grid_ab import HELD_OUT, find_ab
from grid_table import grid_groups
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.model import DROP_DEVICE, DROP_NONE, DropSpec, Model
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import HostCosts, whatif

K_MAX_NS = 40_000.0


def _per_call(m: Model, k: float) -> Model:
    top = m.a_top == np.arange(m.a_top.size)
    cut = np.where(top, int(k), 0)
    return replace(m, a_gap=np.maximum(m.a_gap - cut, 0),
                   a_gap_drop=np.maximum(m.a_gap_drop - cut, 0))


@dataclass(frozen=True)
class _Form:
    """A model transform with one parameter (``HostCosts``-like: ``apply(model)``)."""

    fn: Callable[[Model, float], Model]
    p: float

    def apply(self, m: Model) -> Model:
        return self.fn(m, self.p)


# name -> (transform of the parameter p, p's search range, whether the step grows with p)
FORMS: dict[str, tuple[Callable[[Model, float], Model], float, float, bool]] = {
    "proportional": (lambda m, s: HostCosts(s, s).apply(m), 0.01, 4.0, True),
    "gaps": (lambda m, s: HostCosts(s, 1.0).apply(m), 0.01, 4.0, True),
    "per-call": (_per_call, 0.0, K_MAX_NS, False),
}


def _step(tls: list[Timeline], form: str, p: float, drop: str) -> float:
    fn = FORMS[form][0]
    res = whatif(tls, DropSpec(kinds=drop), host=_Form(fn, p))
    return max(r.predicted_us for r in res.ranks)


def predict(tls: list[Timeline], form: str, device_us: float) -> float:
    """Fit the form's parameter on ``device_us`` (bisection), predict without the syncs."""
    _, lo, hi, grows = FORMS[form]
    sign = 1.0 if grows else -1.0
    f_lo = sign * (_step(tls, form, lo, DROP_NONE) - device_us)
    if f_lo >= 0:
        return _step(tls, form, lo, DROP_DEVICE)
    if sign * (_step(tls, form, hi, DROP_NONE) - device_us) <= 0:
        return _step(tls, form, hi, DROP_DEVICE)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        f = sign * (_step(tls, form, mid, DROP_NONE) - device_us)
        if abs(f) <= 1e-3 * device_us:
            break
        lo, hi = (mid, hi) if f < 0 else (lo, mid)
    return _step(tls, form, mid, DROP_DEVICE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", nargs="+")
    ap.add_argument("--ab", help="DIR/<shape>/ab.json (default: beside the grids)")
    ap.add_argument("--shapes", choices=["all", "tune", "held-out"], default="tune")
    args = ap.parse_args(argv)
    grids = [Path(g) for g in args.grid]
    ab = find_ab(grids, Path(args.ab) if args.ab else None)
    total = dict.fromkeys(FORMS, 0.0)
    print(f"{'profiler':8} {'shape':16} {'ab event':>9}  " + "  ".join(f"{f:>12}" for f in FORMS))
    for (prof, shape), pol in sorted(grid_groups(grids).items()):
        held = shape in HELD_OUT
        if shape not in ab or (args.shapes == "tune" and held) or (
                args.shapes == "held-out" and not held):
            continue
        t = ab[shape]
        runs = [load_timelines([d], jobs=1, progress=False) for d in pol["device"]]
        cells = []
        for form in FORMS:
            e = 100.0 * (statistics.median(predict(tls, form, t.device) for tls in runs)
                         - t.event) / t.event
            total[form] += abs(e)
            cells.append(f"{e:+12.1f}")
        print(f"{prof:8} {shape:16} {t.event:9,.0f}  " + "  ".join(cells))
    print("summed |error| %: " + ", ".join(f"{f} {v:.1f}" for f, v in total.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
