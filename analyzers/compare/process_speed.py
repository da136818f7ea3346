"""Did the two processes of a traced pair run at one speed? (``compare A B``, ``whatif A
--against B``; docs/html-and-compare.md, "Process speed in a traced pair").

``profplug run`` times its process's steps inside the profiling window (traced) and around
it (untraced) with one step timer, into run.json (``steps/observer.py``). A run's
**observer effect** is traced / untraced: how much the profiler slowed that process.

A traced pair's B - A is the policies' difference only when both processes ran at the speed
of their policy. The processes ran at different speeds when either sign fires (each "beyond
its noise", below; syncs: device-wide synchronizes per step):

===========================================  ===============================================
sign                                         fires when
===========================================  ===============================================
the observer effects differ                  always
the untraced steps differ                    both runs make as many syncs (an A/A, two event
                                             runs), or the run with fewer is the slower one
===========================================  ===============================================

(Where the run with fewer syncs is the faster one untraced, the policy may be the
difference: the observer effects alone decide.) Then the pair's difference mixes the policy with each process's own speed (a host drawn slow
or fast per process, a profiler that slows one policy's host more), and one process each
cannot tell them apart: ``profplug ab`` can, over interleaved rounds of the unprofiled job.
``compare`` names no winner and ``whatif --against`` and compare's answer do not judge the
prediction (inside / outside its band): the measured run ran at another speed than the
predicted one, by an amount one pair cannot measure. The sentence says which sign fired.

**The series.** Per run, those of its observer object: the slowest traced rank's traced
steps; the untraced steps of the rank whose untraced median is the run's (those before the
window when there are enough, as the observer takes them). Medians over the non-outlier
steps (``steps.stats.center``). A run's device-wide synchronizes per step: the most on one of
its ranks (``answer.device_syncs_per_step``); two runs make as many when they differ by less
than ``SAME_SYNCS`` a step (the window's edges add a call or two to one run).

**Beyond their noise.** The observer effects' factor is ``F = (tB / tA) / (uB / uA)``, the
untraced steps' ``U = uB / uA``. Each is beyond its noise when its |ln| is beyond the
largest of its series' per-step spreads (scaled MAD / center: all four for F, the two
untraced ones for U) and the half-widths of the 95% block-bootstrap interval of its ln
(``noise.py``'s resampling: each series drawn by a generator seeded by its own steps, and
every ln a difference B - A, so the answer is exactly the same whichever run is A).

Without both run.json series (a run not made by ``profplug run``, an older run.json), there
is no check and nothing is said; without either run's synchronize count (no steps) only the
observer effects are checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from profplug.analyzers.compare.noise import MIN_STEPS, block_medians, own_rng, rank_interval
from profplug.analyzers.steps.observer import from_meta, rank_series
from profplug.analyzers.steps.stats import center, scaled_mad
from profplug.analyzers.whatif.against import AgainstResult

AB_HINT = "`profplug ab` measures the policies in interleaved rounds of the unprofiled job"
SAME_SYNCS = 0.5  # device-wide synchronizes per step: closer than this, as many on both runs
Syncs = Callable[[], tuple[dict[int, float], dict[int, float]]]  # per rank, A's and B's


@dataclass(frozen=True)
class ProcessSpeed:
    """The two processes' traced and untraced steps (us), the two signs of different speeds
    and which fired (module docstring; factors: B over A)."""

    traced_a_us: float
    untraced_a_us: float
    traced_b_us: float
    untraced_b_us: float
    factor: float  # F = (tB / uB) / (tA / uA)
    noise_factor: float  # exp(the noise of ln F): a factor of 1.05 = about +-5%
    observer_differs: bool  # |ln F| > ln(noise_factor)
    untraced_factor: float  # U = uB / uA
    untraced_noise_factor: float  # exp(the noise of ln U)
    untraced_beyond: bool  # |ln U| > ln(untraced_noise_factor)
    syncs_a: float | None  # device-wide synchronizes per step (the most on a rank); None:
    syncs_b: float | None  # unknown (no steps)
    untraced_differs: bool  # untraced_beyond, and the syncs do not explain it

    @property
    def differs(self) -> bool:
        """The processes ran at different speeds: either sign fired."""
        return self.observer_differs or self.untraced_differs

    def overhead_pct(self, run: str) -> float:
        """A run's observer effect, % ("a" | "b"): traced over untraced, less 100."""
        t, u = ((self.traced_a_us, self.untraced_a_us) if run == "a"
                else (self.traced_b_us, self.untraced_b_us))
        return 100.0 * (t / u - 1.0)

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None, n: int) -> float | None:
            return None if x is None else round(x, n)
        return {"traced_a_us": round(self.traced_a_us, 3),
                "untraced_a_us": round(self.untraced_a_us, 3),
                "traced_b_us": round(self.traced_b_us, 3),
                "untraced_b_us": round(self.untraced_b_us, 3),
                "overhead_a_pct": round(self.overhead_pct("a"), 1),
                "overhead_b_pct": round(self.overhead_pct("b"), 1),
                "factor": round(self.factor, 4), "noise_factor": round(self.noise_factor, 4),
                "observer_differs": self.observer_differs,
                "untraced_factor": round(self.untraced_factor, 4),
                "untraced_noise_factor": round(self.untraced_noise_factor, 4),
                "untraced_beyond": self.untraced_beyond,
                "device_syncs_per_step_a": r(self.syncs_a, 2),
                "device_syncs_per_step_b": r(self.syncs_b, 2),
                "untraced_differs": self.untraced_differs, "differs": self.differs}

    def _untraced_words(self, label_a: str, label_b: str) -> str:
        u, nu = self.untraced_factor, self.untraced_noise_factor
        s = (f"untraced {label_b} over {label_a}: a factor of {u:.2f} ("
             + ("beyond" if self.untraced_beyond else "within") + f" the noise, a factor of {nu:.2f}); "
             "device-wide synchronizes per step: ")
        if self.syncs_a is None or self.syncs_b is None:
            return s + "unknown"
        return s + f"{label_a} {self.syncs_a:.1f}, {label_b} {self.syncs_b:.1f}"

    def _why(self, label_a: str, label_b: str) -> str:
        """Which sign fired, in words."""
        why = []
        if self.untraced_differs:
            assert self.syncs_a is not None and self.syncs_b is not None
            fewer = label_a if self.syncs_a < self.syncs_b else label_b
            why.append("the untraced steps differ beyond their noise, " + (
                "with as many synchronizes on both" if same_syncs(self.syncs_a, self.syncs_b)
                else f"and {fewer}, with fewer synchronizes, is the slower"))
        if self.observer_differs:
            why.append("the observer effects differ beyond their noise")
        return " and ".join(why)

    def sentence(self, label_a: str, label_b: str) -> str:
        """What run.json says of the two processes, in one sentence: both signs' numbers,
        and when they ran at different speeds which sign fired."""
        far = max(self.factor, 1.0 / self.factor)
        head = ("the processes ran at different speeds" if self.differs
                else "the processes ran at one speed")
        return (f"{head}: untraced (run.json) {label_a} {self.untraced_a_us:,.1f} vs "
                f"{label_b} {self.untraced_b_us:,.1f} us/step, traced {self.traced_a_us:,.1f}"
                f" vs {self.traced_b_us:,.1f}; {self._untraced_words(label_a, label_b)}; "
                f"traced over untraced: {label_a} {self.overhead_pct('a'):+.1f}%, {label_b} "
                f"{self.overhead_pct('b'):+.1f}%, a factor of {far:.2f} apart ("
                + ("beyond" if self.observer_differs else "within")
                + f" the noise, a factor of {self.noise_factor:.2f})"
                + (f": no winner from this pair ({self._why(label_a, label_b)}); {AB_HINT}"
                   if self.differs else ""))


def same_syncs(a: float, b: float) -> bool:
    """Two runs make as many device-wide synchronizes per step (``SAME_SYNCS``)."""
    return abs(a - b) < SAME_SYNCS


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


def _ln_ratio(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """ln(center B / center A) and its block-bootstrap replicates, each a difference B - A
    (negated exactly when A and B trade places)."""
    return (math.log(center(b)) - math.log(center(a)),
            np.log(block_medians(b, own_rng(b))) - np.log(block_medians(a, own_rng(a))))


def _noise(stat: float, boot: np.ndarray, series: tuple[np.ndarray, ...]) -> float:
    """The noise of a ln statistic: the largest of the series' per-step spreads and the
    half-widths of its bootstrap interval (module docstring)."""
    lo, hi = rank_interval(boot)
    return max(*(scaled_mad(x) / center(x) for x in series), stat - lo, hi - stat)


def _explained(ln_u: float, syncs_a: float | None, syncs_b: float | None) -> bool:
    """The untraced steps' difference may be the policy's: the run with fewer device-wide
    synchronizes is the faster one (or either count unknown: no judgement)."""
    if syncs_a is None or syncs_b is None:
        return True
    return not same_syncs(syncs_a, syncs_b) and (syncs_b < syncs_a) == (ln_u < 0)


def process_speed(meta_a: dict[str, Any], meta_b: dict[str, Any], syncs: Syncs
                  ) -> ProcessSpeed | None:
    """The process-speed check of two traced runs' run.json (None: either lacks the series);
    ``syncs``: the runs' device-wide synchronizes per step per rank, asked only then."""
    sa, sb = _observer_series(meta_a), _observer_series(meta_b)
    if sa is None or sb is None or min(center(x) for x in (*sa, *sb)) <= 0:
        return None
    (ln_t, boot_t), (ln_u, boot_u) = _ln_ratio(sa[0], sb[0]), _ln_ratio(sa[1], sb[1])
    ln_f = ln_t - ln_u
    noise_f = _noise(ln_f, boot_t - boot_u, (*sa, *sb))
    noise_u = _noise(ln_u, boot_u, (sa[1], sb[1]))
    per_a, per_b = syncs()
    n_a, n_b = max(per_a.values(), default=None), max(per_b.values(), default=None)
    beyond_u = abs(ln_u) > noise_u
    return ProcessSpeed(
        center(sa[0]), center(sa[1]), center(sb[0]), center(sb[1]), math.exp(ln_f),
        math.exp(noise_f), abs(ln_f) > noise_f, math.exp(ln_u), math.exp(noise_u), beyond_u,
        n_a, n_b, beyond_u and not _explained(ln_u, n_a, n_b))


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
