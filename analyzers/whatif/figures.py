"""The figures a user reads of a what-if, made once: every output (the report's headline, the
what-if's table, JSON and page, ``--against``, ``compare``, ``ab``) formats these and
computes none of its own (docs/whatif.md, "The error band").

**The pipeline's rank.** A pipeline runs at its slowest rank's rate: the run's step is the
largest rank step (``steps/runstep.py``), and the prediction is the largest predicted step,
that of :func:`pipeline_rank`. Every figure of the prediction in words (its rank, the rank's
recorded step and measured idle in the dropped calls, the predicted step, its band) is that
rank's and names it; the speedup is the run's step over the predicted step (the JSON's
``step.us`` / ``predicted_step.us``).

**Targets.** A band says where a measurement of the predicted run lands, and that depends on
what the prediction is held against (:class:`Target`): the same run replayed (the model's
own error, ``error_band_pct`` of a traced what-if), a separate traced run of the other policy
(its host's speed is drawn per process: ``run_band_pct``), or an unprofiled ``profplug ab``
(a what-if calibrated on an unprofiled step, ``--unprofiled``: ``error_band_pct`` with the
calibration's term). Each output shows the band of the target it compares with, named by
:data:`TARGET_WORDS`.

**Nothing to drop.** When dropping the calls changes no rank's replay (no call dropped, or
none that moved a step: the predicted step within ``TINY_PCT`` of the replay as recorded,
and no idle measured in them) there is no prediction: no speedup, no band.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Protocol

from profplug.analyzers.whatif.peers import PEERS_MISSING

TINY_PCT = 0.5  # a change of the replay under this share of the step: nothing dropped
NO_HOST_SCALE = "unprofiled: no host scale"  # whatif/unprofiled.py's
NO_MATCH = "no call matched the drop rule"  # whatif/predict.py's
STORED = "stored prediction"  # ab/overlay.py's: kept from ab.json, calibrated elsewhere


class Target(str, Enum):
    """What a prediction is held against (the band's target)."""

    REPLAY = "replay"
    TRACED = "traced"
    UNPROFILED = "unprofiled"


TARGET_WORDS = MappingProxyType({Target.REPLAY: "the same run replayed (the model's own error)",
                                 Target.TRACED: "a separate traced run",
                                 Target.UNPROFILED: "an unprofiled run (profplug ab)"})


class _Rank(Protocol):
    rank: int
    basis: str
    recorded_us: float
    replayed_us: float
    predicted_us: float
    direct_us: float
    dropped_calls: int
    error_band_pct: float | None
    run_band_pct: float | None


class _Result(Protocol):
    @property
    def ranks(self) -> Any: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def calibrated_on_us(self) -> float | None: ...


def own_target(res: _Result) -> Target:
    """The target a what-if stands for by itself: an unprofiled run when calibrated on an
    unprofiled step, else a separate traced run of the other policy."""
    return Target.UNPROFILED if res.calibrated_on_us is not None else Target.TRACED


def band_pct(r: _Rank, target: Target) -> float | None:
    """A rank's band (+-% of its predicted step) for ``target``; None: withheld."""
    if r.error_band_pct is None:
        return None
    if target is Target.TRACED:
        return float(r.run_band_pct or r.error_band_pct)
    return float(r.error_band_pct)


def stepped(res: _Result) -> list[Any]:
    """The ranks the pipeline's figures are taken over: those per step (else all)."""
    return [r for r in res.ranks if r.basis == "step"] or list(res.ranks)


def pipeline_rank(res: _Result) -> Any | None:
    """The rank whose prediction is the pipeline's: the largest predicted step (the first
    such rank on a tie)."""
    ranks = stepped(res)
    return max(ranks, key=lambda r: r.predicted_us) if ranks else None


def idle_rank(res: _Result) -> Any | None:
    """The rank where the dropped calls left the GPU idle most (measured); on a tie, the
    pipeline's rank."""
    p = pipeline_rank(res)
    ranks = stepped(res)
    if not ranks:
        return None
    return max(ranks, key=lambda r: (r.direct_us, r is p))


def traced_step_us(r: Any) -> float:
    """The rank's step in the trace (a calibrated what-if's ``recorded_us`` is the given
    unprofiled step; its ``traced_us`` the trace's)."""
    return float(getattr(r, "traced_us", None) or r.recorded_us)


def nothing_to_drop(res: _Result) -> bool:
    """Whether dropping the calls changed no rank's replay (the module docstring)."""
    for r in res.ranks:
        moved = abs(r.predicted_us - r.replayed_us) > TINY_PCT / 100.0 * max(r.replayed_us, 0.0)
        if r.dropped_calls and (moved or r.direct_us >= 0.5):
            return False
    return True


ANSWER_WARNINGS = (PEERS_MISSING, NO_HOST_SCALE, "unprofiled-ci", NO_MATCH, STORED)


def answer_warnings(warnings: list[str]) -> list[str]:
    """Of a what-if's warnings, those that change what its prediction says (printed next to
    it, not only stored): peers missing, a calibration that did not fit or a CI it could not
    use, a drop rule that matched no call."""
    return [w for w in warnings if isinstance(w, str) and w.startswith(ANSWER_WARNINGS)]


def caveats(res: _Result) -> list[str]:
    """:func:`answer_warnings` of ``res`` (peers missing: said by the withheld band)."""
    return [w for w in answer_warnings(res.warnings) if not w.startswith(PEERS_MISSING)]


@dataclass(frozen=True)
class Prediction:
    """The pipeline's prediction in figures (us): see the module docstring."""

    rank: int
    basis: str  # "step" | "window"
    recorded_us: float  # the rank's recorded step (or the given unprofiled step)
    run_step_us: float  # the run's step: the largest recorded step
    predicted_us: float
    idle_rank: int  # the rank where the dropped calls left the GPU idle most
    direct_us: float  # that rank's measured idle in the dropped calls, per step
    idle_step_us: float  # that rank's traced step
    target: Target
    band_pct: float | None  # None: withheld (peer ranks missing)
    calibrated: bool
    caveats: list[str] = field(default_factory=list)
    n_ranks: int = 1  # the ranks the pipeline's rank is the slowest of

    @property
    def speedup(self) -> float | None:
        return self.run_step_us / self.predicted_us if self.predicted_us > 0 else None

    @property
    def withheld(self) -> bool:
        return self.band_pct is None

    @property
    def target_words(self) -> str:
        return TARGET_WORDS[self.target]

    def band_us(self) -> tuple[float, float] | None:
        """The band's ends (us)."""
        if self.band_pct is None:
            return None
        return (self.predicted_us * (1.0 - self.band_pct / 100.0),
                self.predicted_us * (1.0 + self.band_pct / 100.0))

    def to_dict(self) -> dict[str, Any]:
        """The JSON's words for it (``predicted_step``'s ``rank``, ``band_pct``, ...)."""
        sp = self.speedup
        return {"rank": self.rank, "band_pct": self.band_pct, "target": self.target.value,
                "band_for": self.target_words,
                "speedup": None if sp is None else round(sp, 4)}


def prediction(res: _Result, target: Target | None = None) -> Prediction | None:
    """The pipeline's prediction of ``res`` held against ``target`` (default: its own,
    :func:`own_target`); None: no rank, or nothing to drop."""
    r, d = pipeline_rank(res), idle_rank(res)
    if r is None or d is None or nothing_to_drop(res):
        return None
    t = target or own_target(res)
    return Prediction(rank=r.rank, basis=r.basis, recorded_us=float(r.recorded_us),
                      run_step_us=max(float(x.recorded_us) for x in stepped(res)),
                      predicted_us=float(r.predicted_us), idle_rank=d.rank,
                      direct_us=float(d.direct_us), idle_step_us=traced_step_us(d),
                      target=t, band_pct=band_pct(r, t),
                      calibrated=res.calibrated_on_us is not None, caveats=caveats(res),
                      n_ranks=len(stepped(res)))
