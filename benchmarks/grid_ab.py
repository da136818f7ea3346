"""Issue 16's validation table: the what-if on the grid against its ground truth, per
(profiler, shape). Used by ``whatif_grid.py table``.

Ground truth (``profplug ab``, no profiler): ``<AB>/<shape>/ab.json`` per shape, from
``table --ab AB``, else found beside a grid (``GRID/ab/<shape>/`` as ``capture --traces ab``
writes it, or a sibling ``grid_ab/<shape>/``).

Per (profiler, shape), the pipeline's step (the slowest rank's) of every repeat:

- *profiled*: ``predicted`` = ``whatif`` on each traced device run (median over the repeats,
  and their range), ``measured`` = the traced event runs' recorded step (median, range);
  ``error`` = median predicted vs median measured; the goal is 10%.
- *unprofiled*: ``whatif --unprofiled`` on each traced device run, calibrated on ab's device
  median, against ab's event median and its 95% CI; the goal is 15%. ``in CI``: the median
  prediction inside ab's CI; ``in band``: ab's median inside the prediction's error band.
- ``slow dev/evt``: how many of the device / event repeats ran in the VM's slow host mode
  (median launch call over ``SLOW_LAUNCH_US``): the process-to-process host-speed lottery that
  no model of one run can see (``docs/whatif.md``, Validation).
- ``evt spread``: the traced event repeats' own range around their median, +-%: how far one
  measured repeat is from the next, the floor under any prediction's error.

``set``: ``held-out`` for the shapes fixed before tuning (``HELD_OUT``), else ``tune``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from grid_table import Row, in_band

# Fixed before any tuning on the ab ground truth (docs/whatif.md, "Held-out shapes").
HELD_OUT = ("h2048_l8_b8_s2", "h8192_l8_b8_s2", "h1024_l16_b1_s2")
SLOW_LAUNCH_US = 5.5  # median launch call above this: the slow host mode (docs/whatif.md)
PROFILED_GOAL, UNPROFILED_GOAL = 10.0, 15.0


@dataclass
class AbTruth:
    """One shape's ``profplug ab`` summary (us)."""

    shape: str
    rounds: int
    device: float
    device_ci: list[float]
    event: float
    event_ci: list[float]
    speedup: float | None
    speedup_ci: list[float] | None
    path: str


def read_ab(path: Path) -> AbTruth | None:
    d = json.loads(path.read_text())
    s = d.get("summary") or {}
    dev, evt = s.get("device") or {}, s.get("event") or s.get("none") or {}
    if not dev.get("median_step_us") or not evt.get("median_step_us"):
        return None
    return AbTruth(shape=path.parent.name, rounds=int(d.get("rounds") or 0),
                   device=float(dev["median_step_us"]), device_ci=list(dev.get("ci95_us") or []),
                   event=float(evt["median_step_us"]), event_ci=list(evt.get("ci95_us") or []),
                   speedup=evt.get("speedup_vs_device"),
                   speedup_ci=evt.get("speedup_ci95") if evt.get("paired") else None,
                   path=str(path))


def find_ab(grids: list[Path], ab_dir: Path | None = None) -> dict[str, AbTruth]:
    """shape -> ab truth: ``ab_dir/<shape>/ab.json``, else beside the grids."""
    dirs = [ab_dir] if ab_dir else [d for g in grids for d in (g / "ab", g.parent / "grid_ab")]
    out: dict[str, AbTruth] = {}
    for d in dirs:
        for f in sorted(d.glob("*/ab.json")) if d.is_dir() else []:
            t = read_ab(f)
            if t is not None:
                out.setdefault(t.shape, t)
    return out


def ab_unprofiled(ab: dict[str, AbTruth]) -> dict[str, dict[str, list[float]]]:
    """The form ``grid_table.build_rows`` calibrates ``--unprofiled`` with."""
    return {s: {"device": [t.device], "event": [t.event], "device_ci": list(t.device_ci),
                "speedup_ci": list(t.speedup_ci or [])} for s, t in ab.items()}


@dataclass
class Cell:
    """One (profiler, shape) of the table; steps in us, errors in %."""

    set: str
    profiler: str
    shape: str
    predicted: list[float]  # per device repeat: the slowest rank's prediction
    measured: list[float]  # per event repeat: the slowest rank's recorded step
    band: list[float]  # per device repeat, +-%
    slow_dev: int
    slow_evt: int
    unprof_pred: list[float]
    unprof_band: list[float]
    unprof_cal: list[float]  # the unprofiled band's calibration term, %
    ab: AbTruth | None
    host_adj: list[float]  # (device, event) pairs in one host mode, at the event's host speed

    @property
    def error(self) -> float:
        m = statistics.median(self.measured)
        return 100.0 * (statistics.median(self.predicted) - m) / m

    @property
    def spread(self) -> float:
        m = statistics.median(self.measured)
        return 100.0 * max(abs(x - m) for x in self.measured) / m

    @property
    def unprof_error(self) -> float | None:
        if not self.unprof_pred or self.ab is None:
            return None
        return 100.0 * (statistics.median(self.unprof_pred) - self.ab.event) / self.ab.event

    def in_ci(self) -> bool | None:
        if not self.unprof_pred or self.ab is None or len(self.ab.event_ci) != 2:
            return None
        lo, hi = self.ab.event_ci
        return bool(lo <= statistics.median(self.unprof_pred) <= hi)

    def in_band(self) -> bool | None:
        e = self.unprof_error
        return None if e is None else in_band(e, statistics.median(self.unprof_band))


def cells(rows: list[Row], ab: dict[str, AbTruth], held_out: tuple[str, ...] = HELD_OUT
          ) -> list[Cell]:
    """One cell per (profiler, shape) of the grid rows (``source == "grid"``)."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.source == "grid":
            groups.setdefault((r.profiler, r.shape), []).append(r)
    out = []
    for (prof, shape), rs in sorted(groups.items(), key=lambda kv: _key(kv[0])):
        nd, ne = len(rs[0].device), len(rs[0].event)
        pred = [max(r.device[i].predicted for r in rs) for i in range(nd)]
        meas = [max(r.event[i].recorded for r in rs) for i in range(ne)]
        band = [max(r.device[i].band for r in rs) for i in range(nd)]
        slow_d = sum(max(r.device[i].host for r in rs) > SLOW_LAUNCH_US for i in range(nd))
        slow_e = sum(max(r.event[i].host for r in rs) > SLOW_LAUNCH_US for i in range(ne))
        nu = min(len(r.unprof_pred) for r in rs)
        up = [max(r.unprof_pred[i] for r in rs) for i in range(nu)]
        ub = [max(r.unprof_band[i] for r in rs) for i in range(nu)]
        uc = [max(r.unprof_cal[i] for r in rs) for i in range(nu)]
        out.append(Cell("held-out" if shape in held_out else "tune", prof, shape, pred, meas,
                        band, slow_d, slow_e, up, ub, uc, ab.get(shape),
                        _same_mode_host_adj(rs)))
    return out


def _same_mode_host_adj(rs: list[Row]) -> list[float]:
    """The host-adjusted errors of the (device, event) pairs whose runs share a host mode
    (across modes the two-number host adjustment does not hold: the slow mode does not scale
    every host cost alike)."""
    out = []
    for r in rs:
        ne = len(r.event)
        for k, e in enumerate(r.host_adj):
            d, ev = r.device[k // ne], r.event[k % ne]
            if (d.host > SLOW_LAUNCH_US) == (ev.host > SLOW_LAUNCH_US):
                out.append(e)
    return out


def _key(k: tuple[str, str]) -> tuple:
    prof, shape = k
    p = shape.split("_")
    return (shape in HELD_OUT, prof, int(p[0][1:]) if p[0][1:].isdigit() else 0, shape)


def _r(xs: list[float]) -> str:
    m = statistics.median(xs)
    return f"{m:,.0f} ({min(xs):,.0f}-{max(xs):,.0f}, {len(xs)})" if len(xs) > 1 else f"{m:,.0f}"


def _yn(b: bool | None) -> str:
    return "-" if b is None else ("yes" if b else "**no**")


HEAD = ["set", "profiler", "shape", "predicted (range, n)", "measured event (range, n)",
        "error %", "<=10%", "evt spread +-%", "slow dev/evt", "same-mode host-adj % (med; max)",
        "band +-%", "ab device (cal.)",
        "unprofiled predicted (range)", "ab event (95% CI)", "unprof err %", "<=15%", "in CI",
        "in band"]


def row_cells(c: Cell) -> list[str]:
    u = c.unprof_error
    ab = c.ab
    return [c.set, c.profiler, c.shape, _r(c.predicted), _r(c.measured), f"{c.error:+.1f}",
            _yn(abs(c.error) <= PROFILED_GOAL), f"{c.spread:.0f}",
            f"{c.slow_dev}/{len(c.predicted)} vs {c.slow_evt}/{len(c.measured)}",
            (f"{statistics.median(c.host_adj):+.1f}; {max(c.host_adj, key=abs):+.1f}"
             if c.host_adj else "-"),
            f"{statistics.median(c.band):.0f}",
            f"{ab.device:,.0f}" if ab else "-", _r(c.unprof_pred) if c.unprof_pred else "-",
            (f"{ab.event:,.0f} ({ab.event_ci[0]:,.0f}-{ab.event_ci[1]:,.0f})"
             if ab and len(ab.event_ci) == 2 else "-"),
            f"{u:+.1f}" if u is not None else "-",
            _yn(None if u is None else abs(u) <= UNPROFILED_GOAL), _yn(c.in_ci()),
            (f"{_yn(c.in_band())} ({statistics.median(c.unprof_band):.0f})"
             if c.unprof_band else "-")]


def summary(cs: list[Cell]) -> list[str]:
    lines = []
    for st in ("tune", "held-out"):
        for prof in sorted({c.profiler for c in cs}):
            sel = [c for c in cs if c.set == st and c.profiler == prof]
            if not sel:
                continue
            e = [abs(c.error) for c in sel]
            a = [abs(statistics.median(c.host_adj)) for c in sel if c.host_adj]
            s = (f"{st} {prof}: profiled within {PROFILED_GOAL:.0f}% on "
                 f"{sum(x <= PROFILED_GOAL for x in e)}/{len(e)} shapes (|error| median "
                 f"{statistics.median(e):.1f}%, max {max(e):.1f}%), at matched host speed "
                 f"(same-mode host-adj median) on {sum(x <= PROFILED_GOAL for x in a)}/"
                 f"{len(a)}")
            u = [c for c in sel if c.unprof_error is not None]
            if u:
                ue = [abs(c.unprof_error or 0.0) for c in u]
                s += (f"; unprofiled within {UNPROFILED_GOAL:.0f}% on "
                      f"{sum(x <= UNPROFILED_GOAL for x in ue)}/{len(u)} (|error| median "
                      f"{statistics.median(ue):.1f}%, max {max(ue):.1f}%), inside ab's CI "
                      f"{sum(bool(c.in_ci()) for c in u)}/{len(u)}, ab's median inside the "
                      f"band {sum(bool(c.in_band()) for c in u)}/{len(u)}")
            lines.append(s)
    return lines


def _pred_rel(err_pct: float) -> float:
    """An error relative to the measurement as % of the prediction (what the band is)."""
    return 100.0 * err_pct / (100.0 + err_pct)


def band_fit(rows: list[Row], cs: list[Cell], held_out: tuple[str, ...] = HELD_OUT
             ) -> list[str]:
    """How the error band's constants (``analyzers/whatif/bands.py``) follow from this
    validation, and the band's coverage on the held-out shapes (docs/whatif.md)."""
    from profplug.analyzers.whatif.bands import BASE_PCT, COUPLED_PCT, SLOPE_PCT

    def pairs(sel: list[Row]) -> list[tuple[float, float, float, float, bool]]:
        out = []  # (|error| % of the prediction, |replay err|, host_bound, band, same mode)
        for r in sel:
            ne = len(r.event)
            for k, e in enumerate(r.host_adj):
                d, ev = r.device[k // ne], r.event[k % ne]
                same = (d.host > SLOW_LAUNCH_US) == (ev.host > SLOW_LAUNCH_US)
                out.append((abs(_pred_rel(e)), abs(d.replay_err), d.host_bound, d.band, same))
        return out

    grid = [r for r in rows if r.source == "grid"]
    tune = pairs([r for r in grid if r.shape not in held_out])
    held = pairs([r for r in grid if r.shape in held_out])
    lines = []
    if tune:
        slope = max(((e - rep - BASE_PCT) / hb for e, rep, hb, _, _ in tune if hb >= 0.05),
                    default=0.0)
        base = max((e - rep - slope * hb for e, rep, hb, _, _ in tune if hb < 0.05),
                   default=0.0)
        lines.append(f"band fit, profiled (grid tuning shapes, {len(tune)} host-adj pairs, "
                     f"|error| as % of the prediction): slope needed {slope:.2f} at base "
                     f"{BASE_PCT:.0f} (bands.py: {SLOPE_PCT:.0f}); GPU-bound pairs need base "
                     f"{base:.1f}")
    smp = pairs([r for r in rows if r.source == "samples"])
    if smp:  # the band's host_bound is the max over ranks: back it out of the band
        need = max(e - rep - BASE_PCT - SLOPE_PCT * max(
            (b - rep - BASE_PCT - COUPLED_PCT) / SLOPE_PCT, 0.0) for e, rep, _, b, _ in smp)
        lines.append(f"band fit, coupled (2-rank samples, {len(smp)} pairs): NCCL term needed "
                     f"{need:.2f} at bands.py's slope (bands.py: {COUPLED_PCT:.0f})")
    cal = [statistics.median(c.unprof_cal) for c in cs if c.set == "tune" and c.unprof_cal]
    if cal:
        lines.append(f"band fit, unprofiled: calibration term (the prediction's change over "
                     f"ab's device CI) median {statistics.median(cal):.1f}% over {len(cal)} "
                     "tuning cells (the default when no CI is given)")
    if held:
        lines.append("band coverage, held-out shapes: profiled host-adj pairs "
                     f"{sum(e <= b for e, _, _, b, s in held if s)}/"
                     f"{sum(s for *_, s in held)} in the same host mode, "
                     f"{sum(e <= b for e, _, _, b, _ in held)}/{len(held)} in all")
    return lines


def render(cs: list[Cell], out: TextIO, markdown: bool = False) -> None:
    if markdown:
        out.write("| " + " | ".join(HEAD) + " |\n| " + " | ".join(
            "---" if i < 3 else "---:" for i in range(len(HEAD))) + " |\n")
        for c in cs:
            out.write("| " + " | ".join(row_cells(c)) + " |\n")
    else:
        out.write("  ".join(HEAD) + "\n")
        for c in cs:
            out.write("  ".join(row_cells(c)) + "\n")
    for line in summary(cs):
        out.write(("\n" if markdown else "") + line + "\n")


def dump(cs: list[Cell], path: Path) -> None:
    path.write_text(json.dumps([{**asdict(c), "error_pct": round(c.error, 2),
                                 "unprofiled_error_pct": c.unprof_error,
                                 "in_ci": c.in_ci(), "in_band": c.in_band()} for c in cs],
                               indent=1))
