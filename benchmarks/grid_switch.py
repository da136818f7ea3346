"""The what-if checked inside one process: ``whatif_grid.py switch-table``.

On the 1-GPU VM a process's host runs in one of two speeds, drawn at random per process
(``benchmarks/host_modes.py``: neither the CPU it is bound to nor its address layout decides
it), so a device run and an event run made by two processes differ by up to 2x before any
policy effect: the separate-run table (``grid_ab.py``) cannot tell a model error from that
draw. ``capture --traces kineto-switch,nsys-switch`` traces one process per shape and repeat
that runs ``--window`` steps under one policy, then ``--window`` under the other
(``examples/decode_loop.py --switch``; which one comes first alternates over the repeats),
every step inside a ``decode.<policy>`` range. Per run:

- ``predicted``: ``whatif`` of the run's ``decode.device`` steps (``--step-range
  decode.device``, the device-wide synchronizes dropped), us per step;
- ``measured``: the recorded mean GPU span of its ``decode.event`` steps, us per step;
- ``error`` = (predicted - measured) / measured, in %: at the same host speed, in the same
  trace. The goal is 10%.

Per (profiler, shape): the median predicted and measured over the repeats, the error of the
medians, the paired per-run errors (median and largest |error|), how many runs are within
10%, the median error band (``error_band_pct``) and how many runs' measured value lies inside
its band, and the measured and predicted device/event speedup.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
from grid_table import launch_rows
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import whatif

GOAL_PCT = 10.0
HOST_STEADY_PCT = 10.0  # launch-call median within this between the halves: host held
DEVICE_STEPS, EVENT_STEPS = "decode.device", "decode.event"


@dataclass
class SwitchRun:
    """One traced process with both policies (pipeline = slowest rank), us per step."""

    path: str
    first: str  # the policy of the first half
    device_recorded: float
    predicted: float
    replay_err_pct: float
    band_pct: float
    measured: float  # the event half's recorded step
    launch_dev_us: float = 0.0  # median kernel-launch call in the device half (host speed)
    launch_evt_us: float = 0.0  # ... in the event half

    @property
    def host_change_pct(self) -> float:
        """How much the host's speed changed between the halves (launch call, event vs
        device), %: the process's host mode can flip mid-run."""
        if not self.launch_dev_us:
            return 0.0
        return 100.0 * (self.launch_evt_us / self.launch_dev_us - 1.0)

    @property
    def steady(self) -> bool:
        return abs(self.host_change_pct) <= HOST_STEADY_PCT

    @property
    def error(self) -> float:
        return 100.0 * (self.predicted - self.measured) / self.measured

    @property
    def in_band(self) -> bool:
        return abs(self.measured - self.predicted) <= self.band_pct / 100.0 * self.predicted


@dataclass
class SwitchCell:
    profiler: str
    shape: str
    runs: list[SwitchRun] = field(default_factory=list)

    @property
    def predicted(self) -> float:
        return statistics.median(r.predicted for r in self.runs)

    @property
    def measured(self) -> float:
        return statistics.median(r.measured for r in self.runs)

    @property
    def error(self) -> float:
        return 100.0 * (self.predicted - self.measured) / self.measured

    @property
    def paired(self) -> list[float]:
        return [r.error for r in self.runs]

    @property
    def paired_median(self) -> float:
        """The headline: the median over the runs of each run's own error."""
        return statistics.median(self.paired)


def measure(run: Path) -> SwitchRun | None:
    """One switch run, or None when either half has no steps."""
    def load(name: str) -> list[Timeline]:
        return load_timelines([run], jobs=1, progress=False,
                              read=ReadOptions().with_step_range(name))

    try:
        dev_tls, evt_tls = load(DEVICE_STEPS), load(EVENT_STEPS)
        dev, evt = whatif(dev_tls), whatif(evt_tls)
    except ProfplugError as exc:
        print(f"grid_switch: {run}: {exc}", file=sys.stderr)
        return None
    if not dev.ranks or not evt.ranks or any(r.basis != "step" for r in (*dev.ranks,
                                                                        *evt.ranks)):
        return None
    slow = max(dev.ranks, key=lambda r: r.predicted_us)
    return SwitchRun(path=str(run), first=run.parent.name.removesuffix("-first"),
                     device_recorded=max(r.recorded_us for r in dev.ranks),
                     predicted=slow.predicted_us, replay_err_pct=slow.model_error_pct,
                     band_pct=slow.error_band_pct,
                     measured=max(r.recorded_us for r in evt.ranks),
                     launch_dev_us=launch_median(dev_tls), launch_evt_us=launch_median(evt_tls))


def launch_median(tls: list[Timeline]) -> float:
    """Median kernel-launch call (us) inside the step ranges (one half), over all ranks."""
    out = []
    for tl in tls:
        if not tl.step_start_ns.size:
            continue
        lo, hi = tl.step_start_ns.min(), tl.step_end_ns.max()
        sel = launch_rows(tl) & (tl.api_start_ns >= lo) & (tl.api_end_ns <= hi)
        out.append((tl.api_end_ns - tl.api_start_ns)[sel])
    d = np.concatenate(out) if out else np.zeros(0)
    return round(float(np.median(d)) / 1000.0, 3) if d.size else 0.0


def collect(grids: list[Path]) -> list[SwitchCell]:
    """Every ``<grid>/<profiler>-switch/<shape>/<policy>-first/r*`` run, by cell."""
    cells: dict[tuple[str, str], SwitchCell] = {}
    for grid in grids:
        for prof in sorted(grid.glob("*-switch")):
            for shape in sorted(p for p in prof.iterdir() if p.is_dir()):
                for run in sorted(shape.glob("*-first/r*")):
                    if not run.is_dir():
                        continue
                    m = measure(run)
                    if m is not None:
                        key = (prof.name.removesuffix("-switch"), shape.name)
                        cells.setdefault(key, SwitchCell(*key)).runs.append(m)
    return sorted(cells.values(), key=lambda c: (c.profiler, _shape_key(c.shape)))


def _shape_key(name: str) -> tuple:
    parts = name.split("_")
    return tuple(int(p[1:]) if p[1:].isdigit() else p for p in parts)


def _rng(xs: list[float]) -> str:
    return f"{min(xs):,.0f}-{max(xs):,.0f}"


HEADER = ["set", "profiler", "shape", "runs", "error % (median of runs)", "<=10%",
          "largest run error %", "runs <=10%", "steady-host runs <=10%", "band +-%", "in band",
          "predicted (range)", "measured event (range)", "medians error %",
          "speedup meas / pred"]


def row(c: SwitchCell, held_out: tuple[str, ...]) -> list[str]:
    p = c.paired
    ok = sum(abs(e) <= GOAL_PCT for e in p)
    inb = sum(r.in_band for r in c.runs)
    dev = statistics.median(r.device_recorded for r in c.runs)
    steady = [r.error for r in c.runs if r.steady]
    return [
        "held-out" if c.shape in held_out else "tune", c.profiler, c.shape,
        f"{len(c.runs)} ({sum(r.first == 'device' for r in c.runs)} device first)",
        f"{c.paired_median:+.1f}", "yes" if abs(c.paired_median) <= GOAL_PCT else "**no**",
        f"{max(p, key=abs):+.1f}", f"{ok}/{len(p)}",
        f"{sum(abs(e) <= GOAL_PCT for e in steady)}/{len(steady)}",
        f"{statistics.median(r.band_pct for r in c.runs):.0f}", f"{inb}/{len(c.runs)}",
        f"{c.predicted:,.0f} ({_rng([r.predicted for r in c.runs])})",
        f"{c.measured:,.0f} ({_rng([r.measured for r in c.runs])})",
        f"{c.error:+.1f}",
        f"{dev / c.measured:.2f}x / {dev / c.predicted:.2f}x",
    ]


def summary(cells: list[SwitchCell], held_out: tuple[str, ...]) -> list[str]:
    out = []
    for prof in sorted({c.profiler for c in cells}):
        for name, sel in (("tune", [c for c in cells if c.shape not in held_out]),
                          ("held-out", [c for c in cells if c.shape in held_out])):
            cs = [c for c in sel if c.profiler == prof]
            if not cs:
                continue
            runs = [r for c in cs for r in c.runs]
            errs = [abs(c.paired_median) for c in cs]
            steady = [abs(r.error) for r in runs if r.steady]
            out.append(
                f"{name} {prof} (same process): within 10% on "
                f"{sum(e <= GOAL_PCT for e in errs)}/{len(cs)} shapes (median of the runs' "
                f"errors; |error| median {statistics.median(errs):.1f}%, max {max(errs):.1f}%); "
                f"runs {sum(abs(r.error) <= GOAL_PCT for r in runs)}/{len(runs)}, steady-host "
                f"runs {sum(e <= GOAL_PCT for e in steady)}/{len(steady)} (|error| median "
                f"{statistics.median(steady) if steady else 0:.1f}%, max "
                f"{max(steady) if steady else 0:.1f}%); measured inside the band "
                f"{sum(r.in_band for r in runs)}/{len(runs)}")
    return out


def render(cells: list[SwitchCell], out: TextIO, held_out: tuple[str, ...],
           markdown: bool = False) -> None:
    rows = [row(c, held_out) for c in cells]
    if markdown:
        out.write("| " + " | ".join(HEADER) + " |\n")
        out.write("| " + " | ".join("---" if i < 3 else "---:" for i in range(len(HEADER)))
                  + " |\n")
        for r in rows:
            out.write("| " + " | ".join(r) + " |\n")
        out.write("\n")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADER)]
        out.write("  ".join(h.rjust(w) for h, w in zip(HEADER, widths, strict=True)) + "\n")
        for r in rows:
            out.write("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) + "\n")
    for line in summary(cells, held_out):
        out.write(line + "\n" + ("\n" if markdown else ""))


def dump(cells: list[SwitchCell], path: Path) -> None:
    path.write_text(json.dumps([{"profiler": c.profiler, "shape": c.shape,
                                 "error_pct": c.paired_median, "medians_error_pct": c.error,
                                 "runs": [asdict(r) | {"error_pct": r.error,
                                                       "host_change_pct": r.host_change_pct}
                                          for r in c.runs]}
                                for c in cells], indent=1))
