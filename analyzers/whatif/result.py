"""What-if results as values: dataclasses and ``to_dict`` (the JSON ``whatif`` key).
Times in us; percentages of the recorded time. Rendered by ``render/whatif_*.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from profplug.analyzers.steps.stats import STATISTIC
from profplug.analyzers.whatif import figures

SCHEMA_VERSION = 1


@dataclass
class RankWhatIf:
    """One rank: recorded vs replayed vs predicted time per step (or per window), in us."""

    rank: int
    basis: str  # "step": mean step time over complete steps; "window": GPU window
    n_steps: int
    recorded_us: float  # measured in the trace
    replayed_us: float  # the model replaying the trace as recorded
    model_error_pct: float  # (replayed - recorded) / recorded * 100
    predicted_us: float  # the model replaying without the dropped synchronizes
    saving_us: float  # recorded - predicted
    saving_pct: float
    direct_us: float  # idle gaps that started inside a dropped call (stall analysis)
    indirect_us: float  # saving - direct: late launches after the queue drained
    dropped_calls: int  # calls made non-blocking (per step when basis is "step")
    recorded_idle_by_cause_us: dict[str, float]
    predicted_idle_by_cause_us: dict[str, float]
    # +- around predicted_us, from the validation (bands.py); None: withheld (peers missing)
    error_band_pct: float | None = 0.0
    # +- around predicted_us for a separate run of the other policy: the band plus the
    # host's speed from one process to the next (bands.py)
    run_band_pct: float | None = 0.0
    # idle between groups of steps in the recorded run, not step time (steps.py, costs.md)
    between_steps_idle_us: float = 0.0
    # the data-flow bound (bound.py): this rank's replayed host cadence, the bound held to
    # (the slowest coupled rank's cadence, at most the recorded step), whether it raised the
    # prediction, and the replay's own figure before it
    host_cadence_us: float = 0.0
    bound_us: float = 0.0
    bound_binds: bool = False
    replay_predicted_us: float = 0.0
    # --unprofiled: the rank's step in the trace (recorded_us is then the given step)
    traced_us: float | None = None


@dataclass
class WhatIfResult:
    """A run-level analysis (``Report.run["whatif"]``): every rank's prediction."""

    key: ClassVar[str] = "whatif"

    drop: str  # policy | device-sync | all-sync | none (dropset.py)
    callsite: str | None
    ranks: list[RankWhatIf]
    assumptions: list[str]
    warnings: list[str] = field(default_factory=list)
    drop_note: str | None = None  # why the drop rule is not the one asked for (a fallback)
    n_events: int = 0  # API calls + GPU ops replayed
    replay_s: float = 0.0  # wall time of both replays (model build included)
    max_model_error_pct: float = 0.0
    calibrated_on_us: float | None = None  # --unprofiled: the step the host was fitted to
    # rank -> its predicted timeline (the replay's own op and call times, each rank's clock),
    # kept only when asked (``whatif(keep_predicted=True)``: ``--trace-out``); not in the JSON
    predicted: Any = field(default=None, repr=False, compare=False)

    def dropped(self) -> str:
        """What the replay dropped, in words (the finding line, the headings)."""
        from profplug.analyzers.graph.dropset import drop_words

        at = f" at {self.callsite}" if self.callsite else ""
        return drop_words(self.drop) + at

    def rank(self, r: int) -> RankWhatIf:
        for x in self.ranks:
            if x.rank == r:
                return x
        raise KeyError(r)

    def report_fields(self) -> dict[str, Any]:
        """What it adds to the top of a report's JSON (after ``step``)."""
        return {"predicted_step": self.predicted_step()}

    def predicted_step(self) -> dict[str, Any]:
        """The run's predicted step (``runstep``'s step object) with the prediction's figures
        (``figures``: its rank, band and what it is for, the speedup, nothing to drop): the
        JSON's ``predicted_step``, at the top of a report and in its ``whatif``."""
        from profplug.analyzers.steps.runstep import whatif_steps

        _, predicted = whatif_steps(self)
        pred = figures.prediction(self)
        target = figures.own_target(self)
        predicted.update({"nothing_to_drop": pred is None and bool(self.ranks),
                          **(pred.to_dict() if pred is not None else
                             {"rank": None, "band_pct": None, "target": target.value,
                              "band_for": figures.TARGET_WORDS[target], "speedup": None})})
        return predicted

    def to_dict(self) -> dict[str, Any]:
        """The ``whatif`` object of the JSON report (docs/whatif.md)."""
        from profplug.analyzers.steps.runstep import whatif_steps

        step, _ = whatif_steps(self)
        target = figures.own_target(self)
        return {"version": SCHEMA_VERSION, "step": step, "predicted_step": self.predicted_step(),
                "drop": self.drop, "dropped": self.dropped(),
                "drop_note": self.drop_note, "statistic": STATISTIC,
                "callsite": self.callsite,
                "n_events": self.n_events, "replay_s": round(self.replay_s, 3),
                "max_model_error_pct": round(self.max_model_error_pct, 2),
                "ranks": [{**asdict(r), "band_pct": figures.band_pct(r, target)}
                          for r in self.ranks],
                "assumptions": list(self.assumptions), "warnings": list(self.warnings)}

