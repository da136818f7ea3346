"""An A/B of sync policies as a value: ``AbResult`` and its JSON (``DIR/ab.json``).

Times in us per step (the pipeline's: per step the slowest rank). Schema: docs/ab.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from profplug.analyzers.ab.digestcheck import DigestCheck
from profplug.analyzers.steps.runstep import ab_steps

SCHEMA_VERSION = 1
EXIT_OK = 0
EXIT_OUTPUTS_DIFFER = 1  # a run computed other outputs than the reference run
EXIT_RUNS_FAILED = 5  # some runs failed; the statistics use the rest
EXIT_NO_RESULT = 6  # a policy has no successful run with step times: nothing to compare
EXIT_NOT_REACHED = 7  # a policy reached nothing in a run: it could not have had any effect


@dataclass
class RankSummary:
    """One rank under one policy: median over rounds of its runs' median step."""

    rank: int
    median_step_us: float
    ci95_us: list[float] | None  # None: fewer than 3 rounds
    rounds_ok: int


@dataclass
class PolicySummary:
    """One policy over all rounds."""

    policy: str
    rounds: int
    rounds_ok: int
    round_medians_us: list[float | None]  # by round index; None: failed or not run
    median_step_us: float | None = None
    ci95_us: list[float] | None = None  # None: no run, or fewer than 3 rounds
    host_median_step_us: float | None = None
    host_ci95_us: list[float] | None = None
    ranks: list[RankSummary] = field(default_factory=list)
    # against the baseline (device); None for the baseline itself
    speedup_vs_device: float | None = None
    speedup_ci95: list[float] | None = None  # None: fewer than 3 paired rounds
    speedup_rounds: int = 0  # rounds where both policies ran ok (paired)
    paired: bool | None = None  # the ratio is over paired rounds (False: none in common)
    resolved: bool | None = None  # the speedup CI excludes 1.0 (None: no CI)
    rounds_needed: int | None = None  # when not resolved: rounds that would resolve it
    verdict: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("policy")
        if self.speedup_vs_device is None and self.speedup_rounds == 0:
            for k in ("speedup_vs_device", "speedup_ci95", "speedup_rounds", "paired",
                      "resolved", "rounds_needed"):
                d.pop(k)
        return d


@dataclass
class AbResult:
    """``profplug ab``: every run in execution order, the statistics, the output check."""

    key: ClassVar[str] = "ab"

    policies: list[str]
    rounds: int
    order: str
    seed: int | None
    runs: list[dict[str, Any]]  # as written in ab.json (one per round and policy)
    summary: list[PolicySummary]
    outputs: DigestCheck
    verdict: str
    clock: str = "host"  # cuda_event | host | mixed: what step_us measured
    skip: int | None = None
    steps: int | None = None
    command: list[str] = field(default_factory=list)
    interrupted: int | None = None  # the exit status of an interruption (130: SIGINT)
    warnings: list[str] = field(default_factory=list)
    whatif: dict[str, Any] | None = None
    resamples: int = 0
    # the design, the position effect, the reach check: optional on read (an ab.json from
    # before them has none)
    design: str = "separate"  # separate | switched (--switch-every)
    switch_every: int | None = None
    discard_after_switch: int | None = None
    position_effect: dict[str, Any] | None = None  # separate runs: first run of a round
    after_switch: dict[str, Any] | None = None  # switched: per label, step / block's step
    not_reached: list[str] = field(default_factory=list)  # POLICY NOT REACHED lines
    stopped: str | None = None  # why ab stopped after the first round
    # top-level fields of a read-back ab.json this version does not know (a newer profplug's,
    # a user's note): written back as they were (docs/ab.md: unknown fields are kept)
    unknown: dict[str, Any] = field(default_factory=dict)

    def policy(self, name: str) -> PolicySummary:
        for s in self.summary:
            if s.policy == name:
                return s
        raise KeyError(name)

    @property
    def outputs_identical(self) -> bool | None:
        return self.outputs.identical

    @property
    def failed_runs(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r.get("status") != "ok"]

    def exit_code(self) -> int:
        """0 all ok; 1 outputs differ; else the interruption's status (130 for SIGINT);
        7 a policy reached nothing in a run; 6 a policy has no usable run; 5 some runs
        failed."""
        if self.outputs.identical is False:
            return EXIT_OUTPUTS_DIFFER
        if self.interrupted:
            return self.interrupted
        if self.not_reached:
            return EXIT_NOT_REACHED
        if any(s.median_step_us is None for s in self.summary):
            return EXIT_NO_RESULT
        if self.failed_runs:
            return EXIT_RUNS_FAILED
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """``ab.json`` (docs/ab.md)."""
        doc = self._known()
        for k, v in self.unknown.items():
            doc.setdefault(k, v)
        return doc

    def _known(self) -> dict[str, Any]:
        return {
            "version": SCHEMA_VERSION,
            "policies": list(self.policies),
            "rounds": self.rounds,
            "order": self.order,
            "seed": self.seed,
            "skip": self.skip,
            "steps": self.steps,
            "clock": self.clock,
            "command": list(self.command),
            "runs": self.runs,
            "summary": {s.policy: s.to_dict() for s in self.summary},
            "step": ab_steps(self.summary),  # per policy, the run's step (runstep)
            "outputs_identical": self.outputs.identical,
            "outputs": self.outputs.to_dict(),
            "verdict": self.verdict,
            "verdicts": {s.policy: s.verdict for s in self.summary if s.verdict},
            "whatif": self.whatif,
            "interrupted": self.interrupted is not None,
            "interrupted_status": self.interrupted,
            "warnings": list(self.warnings),
            "bootstrap_resamples": self.resamples,
            "design": self.design,
            "switch_every": self.switch_every,
            "discard_after_switch": self.discard_after_switch,
            "position_effect": self.position_effect,
            "after_switch": self.after_switch,
            "not_reached": list(self.not_reached),
            "stopped": self.stopped,
            "exit_status": self.exit_code(),
        }
