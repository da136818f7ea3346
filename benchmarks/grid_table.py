"""Offline half of the what-if validation grid: predicted (whatif on each device run) vs
measured (the event runs), per profiler, shape and rank. Used by ``whatif_grid.py table``.

Layouts read:

- a grid made by ``whatif_grid.py capture``: ``GRID/<profiler>/<shape>/<policy>/r<k>/``;
- ``--samples DIR``: ``sample_traces/`` (the 2-rank families named in ``SAMPLE_GROUPS``).

Per run: ``recorded`` = the trace's mean GPU span of a step (what ``whatif`` calls recorded);
per device run also ``replay err`` (the replay of the trace as recorded vs the trace) and
``predicted`` (the replay without device-wide synchronizes). ``host`` = the median duration of
the run's kernel-launch calls (``cudaLaunchKernel*``, ``cuLaunchKernel*``) in us: a host-speed
index, with ``gap`` = the mean host time between consecutive kernel-launch calls (gaps over
50 us left out). On the 1-GPU VM host speed is bimodal from process to process (~4.6 vs ~6.5
us per launch, Python gaps 1.5x), which no model of the device run can see. Two ways to take
it out of the comparison: ``same-host`` compares each device run only with the event runs
whose launch index is within ``HOST_MATCH`` of its own; ``host-adj`` compares every (device,
event) pair with the prediction made at the event run's host speed
(``HostCosts(gap_scale=gap ratio, call_scale=launch ratio)``).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.whatif import HostCosts, whatif, whatif_unprofiled
from profplug.analyzers.whatif.unprofiled import UNPROFILED_BAND_PCT

HOST_MATCH = 0.10  # event runs within 10% of the device run's host index count as same-host
LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
SAMPLE_GROUPS = {  # (profiler, family) -> run dirs holding device/ and event/
    ("kineto", "pp2_infer"): ["pp2_infer_kineto", "pp2_infer_repeats/kineto2",
                              "pp2_infer_repeats/kineto3"],
    ("nsys", "pp2_infer"): ["pp2_infer_nsys", "pp2_infer_repeats/nsys2",
                            "pp2_infer_repeats/nsys3"],
    ("kineto", "pp2_megatron"): ["pp2_megatron_kineto"],
    ("nsys", "pp2_megatron"): ["pp2_megatron_nsys"],
}
# Unprofiled step times, us (sample_traces/README.md): pp2_infer = the observer-effect table
# (three interleaved rounds, steps 50-99); pp2_megatron = one 40-step run each (steps 20-39).
SAMPLE_UNPROFILED = {"pp2_infer": {"device": [4618.0], "event": [2525.0]},
                     "pp2_megatron": {"device": [6530.0], "event": [5756.0]}}


@dataclass
class RankRun:
    recorded: float
    host: float  # median kernel-launch call, us
    gap: float  # mean host gap between consecutive kernel-launch calls, us
    compute: float = 0.0  # GPU time of non-NCCL ops per step, us
    replay_err: float = 0.0  # device runs: replay as recorded vs trace, %
    predicted: float = 0.0  # device runs
    band: float = 0.0  # device runs: the result's error_band_pct, when it has one
    host_bound: float = 0.0  # device runs: predicted host-bound idle / predicted step


@dataclass
class Row:
    profiler: str
    shape: str
    rank: int
    source: str  # "grid" | "samples"
    device: list[RankRun] = field(default_factory=list)
    event: list[RankRun] = field(default_factory=list)
    host_adj: list[float] = field(default_factory=list)  # error % per (device, event) pair
    unprof_pred: list[float] = field(default_factory=list)  # --unprofiled, per device run
    unprof_band: list[float] = field(default_factory=list)  # its error_band_pct
    unprof_cal: list[float] = field(default_factory=list)  # the band's calibration term, %
    unprof_meas: float = 0.0  # median unprofiled event step, us

    def unprof_errors(self) -> list[float]:
        m = self.unprof_meas
        return [100.0 * (p - m) / m for p in self.unprof_pred] if m else []

    @property
    def measured(self) -> float:
        return statistics.median(r.recorded for r in self.event)

    def errors(self) -> list[float]:
        m = self.measured
        return [100.0 * (d.predicted - m) / m for d in self.device]

    def compute_change(self) -> float:
        """Event runs' GPU compute time per step vs the device runs', % (medians)."""
        d = statistics.median(x.compute for x in self.device)
        return 100.0 * (statistics.median(x.compute for x in self.event) - d) / d if d else 0.0

    def same_host_errors(self) -> list[float]:
        out = []
        for d in self.device:
            ev = [e.recorded for e in self.event if abs(e.host - d.host) <= HOST_MATCH * d.host]
            if ev:
                m = statistics.median(ev)
                out.append(100.0 * (d.predicted - m) / m)
        return out


def launch_rows(tl: Timeline) -> np.ndarray:
    """Mask over the timeline's API calls: the kernel launches."""
    names = np.array([classify.base_name(n) in LAUNCH_APIS for n in tl.names], dtype=bool)
    return names[tl.api_name] if tl.api_name.size else np.zeros(0, dtype=bool)


def host_index(tl: Timeline) -> tuple[float, float]:
    """(median kernel-launch call, mean gap between consecutive launch calls), us."""
    sel = launch_rows(tl)
    d = (tl.api_end_ns - tl.api_start_ns)[sel]
    if not d.size:
        return 0.0, 0.0
    gaps = []
    for t in np.unique(tl.api_tid[sel]):
        idx = np.nonzero(sel & (tl.api_tid == t))[0]
        idx = idx[np.argsort(tl.api_start_ns[idx])]
        g = tl.api_start_ns[idx[1:]] - tl.api_end_ns[idx[:-1]]
        gaps.append(g[(g >= 0) & (g < 50_000)])
    g = np.concatenate(gaps)
    return (round(float(np.median(d)) / 1000.0, 3),
            round(float(g.mean()) / 1000.0, 3) if g.size else 0.0)


def compute_per_step(tl: Timeline) -> float:
    """GPU time of the non-NCCL ops per step (steps = step ranges), us: whether kernels ran
    longer in one policy than in the other (contention, clocks), which the model keeps fixed."""
    n = max(int(tl.step_start_ns.size), 1)
    comm = classify.comm_for_symbols(tl.names)[tl.gpu_name] if tl.n_gpu else np.zeros(0, bool)
    return round(float((tl.gpu_end_ns - tl.gpu_start_ns)[~comm].sum()) / 1000.0 / n, 1)


def measure(run: Path, device: bool) -> tuple[dict[int, RankRun], list[Timeline]]:
    tls = load_timelines([run], jobs=1, progress=False)
    res = whatif(tls)
    host = {t.rank: host_index(t) for t in tls}
    comp = {t.rank: compute_per_step(t) for t in tls}
    out = {}
    for r in res.ranks:
        rr = RankRun(recorded=r.recorded_us, host=host[r.rank][0], gap=host[r.rank][1],
                     compute=comp[r.rank])
        if device:
            rr.replay_err, rr.predicted = r.model_error_pct, r.predicted_us
            rr.band = float(getattr(r, "error_band_pct", 0.0) or 0.0)
            hb = r.predicted_idle_by_cause_us.get("host_bound", 0.0)
            rr.host_bound = round(hb / r.predicted_us, 3) if r.predicted_us else 0.0
        out[r.rank] = rr
    return out, tls


def grid_groups(grids: list[Path]) -> dict[tuple[str, str], dict[str, list[Path]]]:
    """(profiler, shape) -> policy -> repeat dirs, from ``capture`` grids (merged)."""
    out: dict[tuple[str, str], dict[str, list[Path]]] = {}
    for grid in grids:
        for prof in sorted(p for p in grid.iterdir() if p.is_dir() and p.name != "logs"):
            for shape in sorted(p for p in prof.iterdir() if p.is_dir()):
                pol = out.setdefault((prof.name, shape.name), {"device": [], "event": []})
                for k in ("device", "event"):
                    pol[k] += sorted(d for d in (shape / k).glob("r*") if d.is_dir())
    return {k: v for k, v in out.items() if v["device"] and v["event"]}


def sample_groups(samples: Path) -> dict[tuple[str, str], dict[str, list[Path]]]:
    out = {}
    for key, fams in SAMPLE_GROUPS.items():
        runs = [samples / f for f in fams if (samples / f / "device").is_dir()
                and (samples / f / "event").is_dir()]
        if runs:
            out[key] = {"device": [r / "device" for r in runs],
                        "event": [r / "event" for r in runs]}
    return out


def unprofiled_truth(grids: list[Path]) -> dict[str, dict[str, list[float]]]:
    """shape -> policy -> printed step times of the grids' ``--traces none`` runs."""
    out: dict[str, dict[str, list[float]]] = {}
    for man in (g / "manifest.json" for g in grids):
        if not man.is_file():
            continue
        for run in json.loads(man.read_text()).get("runs", []):
            if run.get("trace") == "none" and run.get("exit") == 0 \
                    and run.get("printed_step_us"):
                out.setdefault(run["shape"], {}).setdefault(run["policy"], []).append(
                    float(run["printed_step_us"]))
    return out


def build_rows(groups: dict[tuple[str, str], dict[str, list[Path]]], source: str,
               unprofiled: dict[str, dict[str, list[float]]] | None = None) -> list[Row]:
    rows: dict[tuple[str, str, int], Row] = {}
    for (prof, shape), pol in groups.items():
        dev_tls = []
        for policy in ("device", "event"):
            for run in pol[policy]:
                ranks, tls = measure(run, policy == "device")
                if policy == "device":
                    dev_tls.append(tls)
                for rank, rr in ranks.items():
                    row = rows.setdefault((prof, shape, rank), Row(prof, shape, rank, source))
                    getattr(row, policy).append(rr)
        mine = [rows[k] for k in rows if k[:2] == (prof, shape)]
        _host_adjusted(mine, dev_tls)
        truth = (unprofiled or {}).get(shape, {})
        if truth.get("device") and truth.get("event"):
            _unprofiled(mine, dev_tls, truth)
    return [r for r in rows.values() if r.device and r.event]


def _unprofiled(rows: list[Row], dev_tls: list[list[Timeline]],
                truth: dict[str, list[float]]) -> None:
    """Each device run calibrated on the median unprofiled device step, predicted against
    the median unprofiled event step (the band carries the measured speedup's CI when ab's
    rounds were paired, else ``device_ci``, the device step's 95% CI: ``profplug ab``)."""
    dev, evt = statistics.median(truth["device"]), statistics.median(truth["event"])
    ci = truth.get("device_ci") or []
    ratio = truth.get("speedup_ci") or []
    for tls in dev_tls:
        res = plain = whatif_unprofiled(tls, dev)
        if len(ci) == 2 or len(ratio) == 2:
            res = whatif_unprofiled(tls, dev, step_ci_us=(ci[0], ci[1]) if len(ci) == 2
                                    else None,
                                    ratio_ci=(ratio[0], ratio[1]) if len(ratio) == 2 else None)
        for r in rows:
            r.unprof_meas = evt
            r.unprof_pred.append(res.rank(r.rank).predicted_us)
            band = float(res.rank(r.rank).error_band_pct)
            r.unprof_band.append(band)
            r.unprof_cal.append(round(band - plain.rank(r.rank).error_band_pct
                                      + UNPROFILED_BAND_PCT, 1))


def _host_adjusted(rows: list[Row], dev_tls: list[list[Timeline]]) -> None:
    """Every (device, event) pair: the device run's prediction at the event run's host speed
    (per rank: the event run's gap and launch indexes over the device run's)."""
    if not rows or not rows[0].event:
        return
    for d, tls in enumerate(dev_tls):
        for e in range(len(rows[0].event)):
            hc = HostCosts(ranks={r.rank: (r.event[e].gap / r.device[d].gap,
                                           r.event[e].host / r.device[d].host) for r in rows})
            res = whatif(tls, host=hc)
            for r in rows:
                m = r.event[e].recorded
                r.host_adj.append(100.0 * (res.rank(r.rank).predicted_us - m) / m)


def _shape_key(name: str) -> tuple:
    parts = name.split("_")
    return (parts[0][0], int(parts[0][1:]) if parts[0][1:].isdigit() else 0, name)


def _l(xs: list[float], fmt: str = "{:,.0f}") -> str:
    return "/".join(fmt.format(x) for x in xs)


def _in_band(rows: list[Row]) -> str:
    """How many host-adjusted pairs fall within their device run's ``error_band_pct``."""
    n = k = 0
    for r in rows:
        n_e = len(r.event)
        for i, err in enumerate(r.host_adj):
            n += 1
            k += in_band(err, r.device[i // n_e].band)
    return f"{k}/{n}"


def in_band(err_pct: float, band_pct: float) -> bool:
    """Whether a measurement ``err_pct`` % off a prediction (relative to the measurement)
    lies inside the prediction's band (+-``band_pct`` % of the prediction)."""
    return abs(err_pct) <= band_pct * (1.0 + err_pct / 100.0) + 1e-9


def _summary(rows: list[Row]) -> list[str]:
    lines = []
    for src, prof in sorted({(r.source, r.profiler) for r in rows}):
        sel = [r for r in rows if r.profiler == prof and r.source == src]
        e = [abs(x) for r in sel for x in r.errors()]
        s = [abs(x) for r in sel for x in r.same_host_errors()]
        a = [abs(x) for r in sel for x in r.host_adj]
        if e:
            lines.append(f"{src} {prof}: |error| median {statistics.median(e):.1f}%, max {max(e):.1f}% "
                         f"over {len(e)} predictions; same-host: "
                         + (f"median {statistics.median(s):.1f}%, max {max(s):.1f}% over "
                            f"{len(s)}" if s else "none")
                         + f"; host-adj: median {statistics.median(a):.1f}%, max {max(a):.1f}% "
                         f"over {len(a)} pairs, {_in_band(sel)} within the error band")
            u = [abs(x) for r in sel for x in r.unprof_errors()]
            if u:
                lines.append(f"{src} {prof} --unprofiled: |error| median "
                             f"{statistics.median(u):.1f}%, max {max(u):.1f}% over {len(u)}")
    return lines


def render(rows: list[Row], out: TextIO, markdown: bool = False) -> None:
    """One line per (profiler, shape, rank): recorded device step(s), predicted, measured."""
    rows = sorted(rows, key=lambda r: (r.source, r.profiler, _shape_key(r.shape), r.rank))
    head = ["profiler", "shape", "rank", "device rec", "replay err %", "predicted", "band +-%",
            "event meas (median)", "error %", "same-host err %", "host-adj err %",
            "host us dev vs evt", "GPU compute evt/dev %", "unprofiled pred (meas)",
            "unprof err %"]
    if markdown:
        out.write("| " + " | ".join(head) + " |\n| " + " | ".join(
            "---" if i < 3 else "---:" for i in range(len(head))) + " |\n")
    else:
        out.write(f"{'prof':6} {'shape':16} {'rk':>2} {'dev rec':>11} {'rep%':>4} "
                  f"{'predicted':>11} {'+-%':>5} {'event meas (med)':>19} {'err %':>11} "
                  f"{'same-host':>11} {'host-adj':>11} host us dev vs evt, GPU evt/dev %, "
                  "unprofiled pred (meas) err %\n")
    for r in rows:
        cells = [r.profiler, r.shape, str(r.rank), _l([d.recorded for d in r.device]),
                 _l([d.replay_err for d in r.device], "{:+.1f}"),
                 _l([d.predicted for d in r.device]), _l([d.band for d in r.device], "{:.0f}"),
                 f"{_l([e.recorded for e in r.event])} ({r.measured:,.0f})",
                 _l(r.errors(), "{:+.1f}"), _l(r.same_host_errors(), "{:+.1f}") or "-",
                 _l(r.host_adj, "{:+.1f}"),
                 f"{_l([d.host for d in r.device], '{:.1f}')} vs "
                 f"{_l([e.host for e in r.event], '{:.1f}')}", f"{r.compute_change():+.1f}",
                 f"{_l(r.unprof_pred)} ({r.unprof_meas:,.0f})" if r.unprof_pred else "-",
                 _l(r.unprof_errors(), "{:+.1f}") or "-"]
        if markdown:
            out.write("| " + " | ".join(cells) + " |\n")
        else:
            out.write(f"{cells[0]:6} {cells[1]:16} {cells[2]:>2} {cells[3]:>11} {cells[4]:>4} "
                      f"{cells[5]:>11} {cells[6]:>5} {cells[7]:>19} {cells[8]:>11} "
                      f"{cells[9]:>11} {cells[10]:>11} {cells[11]}, {cells[12]}, {cells[13]} "
                      f"{cells[14]}\n")
    for line in _summary(rows):
        out.write(("\n" if markdown else "") + line + "\n")


def dump(rows: list[Row], path: Path) -> None:
    path.write_text(json.dumps([asdict(r) for r in rows], indent=1))
