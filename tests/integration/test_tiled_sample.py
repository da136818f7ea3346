"""A real 2-rank trace tiled 40 times with 50 ms of nothing between the copies (a server
between requests): the step is the steps' own median period, not the window over the steps.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.stalls.rank import analyze_rank

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "sample_traces" / "pp2_infer_kineto" / "device"
COPIES, IDLE_NS = 40, 50_000_000


def _replicate():
    spec = importlib.util.spec_from_file_location("bench_whatif",
                                                  ROOT / "benchmarks" / "bench_whatif.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.replicate


def test_tiled_real_trace_keeps_its_step() -> None:
    replicate = _replicate()
    for tl in load_timelines([RUN], progress=False):
        one = analyze_rank(tl).steps
        tiled = analyze_rank(replicate(tl, COPIES, IDLE_NS)).steps
        assert one is not None and tiled is not None
        assert tiled.n_steps == COPIES * one.n_steps
        # the same step and idle per step as one copy: the per-step series of 40 copies has
        # the same median; the idle between copies sits in 39 outlier steps, listed
        assert tiled.period_us == one.period_us
        assert tiled.idle_per_step_us == one.idle_per_step_us
        last = [n for n in tiled.step_numbers if n % (max(one.step_numbers) + 1)
                == max(one.step_numbers)][:-1]  # the last step of every copy but the last
        assert set(last) <= {o["step"] for o in tiled.outliers}
        assert min(o["step_us"] for o in tiled.outliers if o["step"] in last) > IDLE_NS / 1e3
        assert tiled.period_us_mean > 1.4 * one.period_us  # what the mean would have said
