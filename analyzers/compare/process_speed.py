"""Did the two processes of a traced pair run at one speed? (``compare A B``, ``whatif A
--against B``; docs/html-and-compare.md, "Process speed in a traced pair").

``profplug run`` times its process's steps inside the profiling window (traced) and around
it (untraced) with one step timer, into run.json (``steps/observer.py``). A run's
**observer effect** is traced / untraced: how much the profiler slowed that process.

A traced pair's B - A is the policies' difference only when the profiler slowed both
processes alike: then B / A traced equals B / A untraced. When the untraced steps tell
another story than the traced ones, that is when the two observer effects differ, the
pair's difference mixes the policy with each process's own speed (a host drawn slow or fast
per process, a profiler that slows one policy's host more), and one process each cannot
tell them apart: ``profplug ab`` can, over interleaved rounds of the unprofiled job.

**The rule** ("beyond their noise"). Per run, the series of its observer object (the
slowest traced rank's traced steps; the untraced steps of the rank whose untraced median is
the run's, those before the window when there are enough, as the observer takes them). The
statistic is the factor between the observer effects, ``F = (tB / uB) / (tA / uA)``
(medians over the non-outlier steps, ``stepstats.center``), which is also ``(tB / tA) /
(uB / uA)``. The processes ran at different speeds when ``|ln F|`` is beyond the largest of
the four series' per-step spreads (scaled MAD / center) and the half-widths of the 95%
block-bootstrap interval of ``ln F`` (``noise.py``'s resampling: each series drawn by a
generator seeded by its own steps, so the answer is the same whichever run is A). Then
``compare`` names no winner and ``whatif --against`` and compare's answer do not judge the
prediction (inside / outside its band): the measured run ran at another speed than the
predicted one, by an amount one pair cannot measure.

Without both run.json series (a run not made by ``profplug run``, an older run.json), there
is no check and nothing is said.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from profplug.analyzers.compare.noise import MIN_STEPS, block_medians, own_rng, rank_interval
from profplug.analyzers.steps.observer import from_meta, rank_series
from profplug.analyzers.steps.stats import center, scaled_mad
from profplug.analyzers.whatif.against import AgainstResult

AB_HINT = "`profplug ab` measures the policies in interleaved rounds of the unprofiled job"


@dataclass(frozen=True)
class ProcessSpeed:
    """The two processes' traced and untraced steps (us) and whether their observer effects
    differ beyond their noise (factors: B over A)."""

    traced_a_us: float
    untraced_a_us: float
    traced_b_us: float
    untraced_b_us: float
    factor: float  # F = (tB / uB) / (tA / uA)
    noise_factor: float  # exp(the noise of ln F): a factor of 1.05 = about +-5%
    differs: bool  # |ln F| > ln(noise_factor)

    def overhead_pct(self, run: str) -> float:
        """A run's observer effect, % ("a" | "b"): traced over untraced, less 100."""
        t, u = ((self.traced_a_us, self.untraced_a_us) if run == "a"
                else (self.traced_b_us, self.untraced_b_us))
        return 100.0 * (t / u - 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"traced_a_us": round(self.traced_a_us, 3),
                "untraced_a_us": round(self.untraced_a_us, 3),
                "traced_b_us": round(self.traced_b_us, 3),
                "untraced_b_us": round(self.untraced_b_us, 3),
                "overhead_a_pct": round(self.overhead_pct("a"), 1),
                "overhead_b_pct": round(self.overhead_pct("b"), 1),
                "factor": round(self.factor, 4), "noise_factor": round(self.noise_factor, 4),
                "differs": self.differs}

    def sentence(self, label_a: str, label_b: str) -> str:
        """What run.json says of the two processes, in one sentence."""
        far = max(self.factor, 1.0 / self.factor)
        head = ("the processes ran at different speeds" if self.differs
                else "the processes ran at one speed")
        return (f"{head}: untraced (run.json) {label_a} {self.untraced_a_us:,.1f} vs "
                f"{label_b} {self.untraced_b_us:,.1f} us/step, traced {self.traced_a_us:,.1f}"
                f" vs {self.traced_b_us:,.1f}; traced over untraced: {label_a} "
                f"{self.overhead_pct('a'):+.1f}%, {label_b} {self.overhead_pct('b'):+.1f}%, a "
                f"factor of {far:.2f} apart ("
                + ("beyond" if self.differs else "within")
                + f" the noise, a factor of {self.noise_factor:.2f})"
                + (f": no winner from this pair; {AB_HINT}" if self.differs else ""))


def _observer_series(meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """(traced, untraced) step series (us) of the run's observer object (module docstring);
    None without both."""
    obs = from_meta(meta) if isinstance(meta, dict) else None
    ranks = meta.get("ranks") if obs is not None else None
    if obs is None or not isinstance(ranks, list):
        return None
    per = {r.get("rank"): rank_series(r) for r in ranks if isinstance(r, dict)}
    by_untraced = max(obs.get("ranks") or [], key=lambda x: x["untraced_us"], default=None)
    if obs.get("rank") not in per or by_untraced is None or by_untraced["rank"] not in per:
        return None
    traced = np.asarray(per[obs["rank"]][0], dtype=float)
    untraced = np.asarray(per[by_untraced["rank"]][1], dtype=float)
    if traced.size < MIN_STEPS or untraced.size < MIN_STEPS:
        return None
    return traced, untraced


def process_speed(meta_a: dict[str, Any], meta_b: dict[str, Any]) -> ProcessSpeed | None:
    """The process-speed check of two traced runs' run.json (None: either lacks the series)."""
    sa, sb = _observer_series(meta_a), _observer_series(meta_b)
    if sa is None or sb is None:
        return None
    series = (*sa, *sb)  # tA, uA, tB, uB
    c = [center(x) for x in series]
    if min(c) <= 0:
        return None
    ln_f = math.log(c[2]) - math.log(c[3]) - math.log(c[0]) + math.log(c[1])
    boot = [np.log(block_medians(x, own_rng(x))) for x in series]
    lo, hi = rank_interval(boot[2] - boot[3] - boot[0] + boot[1])
    spreads = [scaled_mad(x) / cx for x, cx in zip(series, c, strict=True)]
    noise = max(*spreads, ln_f - lo, hi - ln_f)
    return ProcessSpeed(c[0], c[1], c[2], c[3], math.exp(ln_f), math.exp(noise),
                        abs(ln_f) > noise)


def withhold_against(res: AgainstResult | None, speed: ProcessSpeed | None, label_a: str,
                     label_b: str, say: bool = True) -> AgainstResult | None:
    """``res`` with the prediction not judged (no inside / outside) when the two processes
    ran at different speeds, and (``say``) the reason first among its warnings; else
    ``res``."""
    if res is None or speed is None or not speed.differs:
        return res
    why = [f"{speed.sentence(label_a, label_b)}; the prediction is not judged against it"]
    return replace(res, ranks=[replace(r, withheld=True) for r in res.ranks],
                   warnings=[*(why if say else []), *res.warnings])
