"""The answer ``compare`` leads with, and what makes two runs not comparable.

**The answer** (:func:`whatif_answer`): run A's what-if predicted X us/step (its band); run B
measured Y (the 95% CI when B is a ``profplug ab`` run, else B's per-step spread): error E%.

- X: the pipeline's predicted step, the slowest rank's ``predicted_us`` of A's what-if
  (``Report.run["whatif"]``, basis "step"), and that rank's band: ``run_band_pct`` against
  one traced run (a separate process: its host's speed is its own), ``error_band_pct``
  against an ab directory (its CI carries the rounds' spread);
- Y: B's step, the run's step (``runstep``: the slowest rank's median step, B's JSON
  ``step.us``), +- the per-step spread (:func:`noise.spread_pct`) of B's pipeline
  series (:func:`noise.pipeline_step_us`: per step, the slowest rank); or, from an
  ``ab.json``, the policy's median over rounds and its 95% CI;
- E = (X - Y) / Y * 100.

**Mismatches** (:func:`mismatches`): one line per way the runs differ that makes their
difference say something else than the policy's effect: the command (run.json), the rank
count, the steps in the window, the GPU compute per step (compute us/step: kernels other
than NCCL, whose time includes waiting for a peer; differing by more than ``SHAPE_RATIO``:
another shape or model).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from profplug.analyzers.compare.noise import pipeline_step_us, spread_pct
from profplug.analyzers.steps.runstep import run_step
from profplug.analyzers.steps.stats import center
from profplug.analyzers.whatif import figures
from profplug.analyzers.whatif.result import WhatIfResult

if TYPE_CHECKING:
    from collections.abc import Iterable

    from profplug.analyzers.report.analysis import Report
    from profplug.analyzers.stalls.result import RankResult

SHAPE_RATIO = 1.5  # GPU compute time per step differing by more: another shape


@dataclass(frozen=True)
class Answer:
    """A's predicted step against B's measured one (us)."""

    rank: int  # A's rank whose prediction is the pipeline's (the slowest predicted)
    recorded_us: float  # A's recorded step on that rank
    predicted_us: float
    band_pct: float  # +- around predicted_us
    measured_us: float
    measured_lo_us: float
    measured_hi_us: float
    measured_by: str  # "step spread" | "95% CI over N rounds"
    error_pct: float  # (predicted - measured) / measured * 100
    caveat: str = ""  # why B may not be the run A's what-if predicts
    withheld: str = ""  # why the prediction is not judged against B ("": it is)

    @property
    def predicted_lo_us(self) -> float:
        return self.predicted_us * (1.0 - self.band_pct / 100.0)

    @property
    def predicted_hi_us(self) -> float:
        return self.predicted_us * (1.0 + self.band_pct / 100.0)

    @property
    def within_band(self) -> bool | None:
        """Whether the measured step lies inside the prediction's band (None: withheld)."""
        if self.withheld:
            return None
        return self.predicted_lo_us <= self.measured_us <= self.predicted_hi_us

    def to_dict(self) -> dict[str, Any]:
        d = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        d["predicted_lo_us"] = round(self.predicted_lo_us, 3)
        d["predicted_hi_us"] = round(self.predicted_hi_us, 3)
        d["within_band"] = self.within_band
        return d

    def sentence(self, label_a: str, label_b: str) -> str:
        return (f"{label_a}'s what-if predicted {self.predicted_us:,.0f} us/step "
                f"(±{self.band_pct:.0f}%: {self.predicted_lo_us:,.0f}-"
                f"{self.predicted_hi_us:,.0f}); {label_b} measured {self.measured_us:,.0f} "
                f"us/step ({self.measured_by} {self.measured_lo_us:,.0f}-"
                f"{self.measured_hi_us:,.0f}): "
                + (f"not judged, {self.withheld}" if self.withheld
                   else f"error {self.error_pct:+.1f}%")
                + (f" ({self.caveat})" if self.caveat else ""))


def _prediction(rep_a: Report, separate: bool = False
                ) -> tuple[int, float, float, float] | None:
    """(rank, recorded, predicted, band) of A's what-if, the pipeline's prediction
    (``whatif.figures``: the slowest predicted rank); None: no what-if with per-step
    predictions, nothing to drop, or the band withheld. ``separate``: B is one separate
    traced run, so the band for a separate traced run; else the what-if's own (against an
    ab directory: calibrated on ab's device step, the band for an unprofiled run)."""
    w = rep_a.run.get(WhatIfResult.key)
    if not isinstance(w, WhatIfResult) or not any(r.basis == "step" for r in w.ranks):
        return None
    p = figures.prediction(w, figures.Target.TRACED if separate else None)
    if p is None or p.band_pct is None:  # withheld: peer ranks missing
        return None
    return p.rank, p.recorded_us, p.predicted_us, p.band_pct


def _answer(pred: tuple[int, float, float, float], y: float, lo: float, hi: float,
            by: str) -> Answer | None:
    rank, rec, x, band = pred
    if y <= 0:
        return None
    return Answer(rank, rec, x, band, y, lo, hi, by, 100.0 * (x - y) / y)


def whatif_answer(rep_a: Report, rep_b: Report) -> Answer | None:
    """A's what-if against B's measured steps; None when A has no per-step what-if or B
    has no steps."""
    pred = _prediction(rep_a, separate=True)
    steps, _ = pipeline_step_us(rep_b)
    if pred is None or steps.size == 0:
        return None
    step = run_step(rep_b.ranks)
    y = float(step["us"]) if step["basis"] == "step" and step["us"] else center(steps)
    s = spread_pct(steps) / 100.0
    ans = _answer(pred, y, y * (1.0 - s), y * (1.0 + s), "step spread")
    da, db = device_syncs_per_step(rep_a.ranks), device_syncs_per_step(rep_b.ranks)
    if ans is not None and da and db and max(db.values()) >= 0.5 * max(da.values()):
        ans = replace(ans, caveat=f"but B still makes {syncs_words(db)}: it is not the run "
                      "the what-if predicts")
    return ans


def device_syncs_per_step(ranks: Iterable[RankResult]) -> dict[int, float]:
    """Per rank with steps, its device-wide synchronize calls per step (a full analysis's
    ranks: a brief one counts no syncs)."""
    return {r.rank: sum(s.count for s in r.syncs if s.kind == "device") / r.steps.n_steps
            for r in ranks if r.steps is not None and r.steps.n_steps}


def syncs_words(per_rank: dict[int, float]) -> str:
    """"2.0 device-wide synchronizes per step on each rank", or, where the ranks differ,
    "... per step on rank 1 (the most of 2 ranks)": a rank's count, never a sum."""
    k = max(per_rank, key=lambda r: per_rank[r])
    n = f"{per_rank[k]:.1f} device-wide synchronizes per step"
    if len(per_rank) == 1:
        return n
    if len({f"{v:.1f}" for v in per_rank.values()}) == 1:
        return f"{n} on each rank"
    return f"{n} on rank {k} (the most of {len(per_rank)} ranks)"


def whatif_answer_ab(rep_a: Report, ab: dict[str, Any], policy: str = "event"
                     ) -> Answer | None:
    """A's what-if against ``policy``'s median step in an ``ab.json`` (its 95% CI over
    rounds; without a CI, the median alone)."""
    pred = _prediction(rep_a)
    s = (ab.get("summary") or {}).get(policy) or {}
    y = s.get("median_step_us")
    if pred is None or not isinstance(y, (int, float)):
        return None
    ci = s.get("ci95_us")
    rounds = s.get("rounds_ok", s.get("rounds", 0))
    if isinstance(ci, list) and len(ci) == 2:
        return _answer(pred, float(y), float(ci[0]), float(ci[1]),
                       f"95% CI over {rounds} rounds")
    return _answer(pred, float(y), float(y), float(y), f"median of {rounds} rounds, no CI")


def _command(rep: Report) -> list[str] | None:
    cmd = rep.meta.get("command") if rep.meta else None
    return [str(x) for x in cmd] if isinstance(cmd, list) else None


def _compute_per_step(rep: Report) -> float | None:
    vals = [r.gpu_time().compute_us / r.steps.n_steps for r in rep.ranks
            if r.steps is not None and r.steps.n_steps]
    return max(vals) if vals else None


def _n_steps(rep: Report) -> int:
    return max((r.steps.n_steps for r in rep.ranks if r.steps is not None), default=0)


def mismatches(rep_a: Report, rep_b: Report, label_a: str = "A", label_b: str = "B"
               ) -> list[str]:
    """One line per way the two runs are not like for like (see the module docstring)."""
    out: list[str] = []
    ca, cb = _command(rep_a), _command(rep_b)
    if ca is not None and cb is not None and ca != cb:
        out.append(f"the runs ran different commands ({label_a}: {' '.join(ca)}; "
                   f"{label_b}: {' '.join(cb)})")
    na, nb = len(rep_a.ranks), len(rep_b.ranks)
    if na != nb:
        out.append(f"the runs have different rank counts ({label_a}: {na}, {label_b}: {nb})")
    sa, sb = _n_steps(rep_a), _n_steps(rep_b)
    if (sa == 0) != (sb == 0):
        out.append(f"only {label_a if sa else label_b} has steps")
    elif sa and abs(sa - sb) > max(1, 0.1 * max(sa, sb)):
        out.append(f"the runs have different step counts ({label_a}: {sa}, "
                   f"{label_b}: {sb} steps in the window)")
    ba, bb = _compute_per_step(rep_a), _compute_per_step(rep_b)
    if ba and bb and max(ba, bb) > SHAPE_RATIO * min(ba, bb):
        out.append(f"the runs do different GPU work per step ({label_a}: {ba:,.0f} us of "
                   f"compute, {label_b}: {bb:,.0f} us): another shape or model?")
    return out
