"""Did every run compute the same outputs? The per-step digests of ``profplug.digest``.

The runs that finished ok are compared, each with the first of them that carries digests
(the reference), rank by rank and step by step (a step is its index from the job's first
step, as counted by the step source in control). A run differs at the first step where any
of its ranks' digests differs from the reference's (at that step, the lowest such rank).
A failed run is not compared: its last step may have been cut short.

Under ``profplug ab`` the steps digested are those outside the timed window (the warm-up
steps before it, and the steps after it when the job runs longer): a digest in a timed step
would be part of what is timed (docs/ab.md). In switched runs (``--switch-every``) those
steps alternate policies in blocks too, and the block order rotates from run to run, so the
same step ran under different policies in different runs: a mismatch names the policy that
ran the step in each run (``policy``, ``reference_policy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Mismatch:
    """A run whose outputs differ from the reference run's."""

    run: int  # index in execution order
    round: int
    policy: str
    step: int  # the first step that differs
    rank: int  # the lowest rank differing at that step
    expected: str | None  # the reference's digest of that step and rank
    got: str | None
    reference_run: int
    reference_round: int
    reference_policy: str

    def line(self) -> str:
        return (f"run {self.run} (round {self.round}, {self.policy}) differs from run "
                f"{self.reference_run} (round {self.reference_round}, "
                f"{self.reference_policy}) first at step {self.step} on rank {self.rank} "
                f"(digest {self.got or 'none'} != {self.expected or 'none'})")


@dataclass
class DigestCheck:
    identical: bool | None  # None: nothing was digested (nothing to compare)
    compared_runs: int = 0
    digested_steps: int = 0  # steps with a digest in the reference run (all ranks)
    reference_run: int | None = None
    mismatches: list[Mismatch] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"identical": self.identical, "compared_runs": self.compared_runs,
                "digested_steps": self.digested_steps, "reference_run": self.reference_run,
                "mismatches": [asdict(m) for m in self.mismatches], "note": self.note}


def _steps(rank: dict[str, Any]) -> list[str | None]:
    return list(rank.get("step_digests") or [])


def _first_difference(ref: dict[int, list[str | None]], got: dict[int, list[str | None]]
                      ) -> tuple[int, int, str | None, str | None] | None:
    """(step, rank, expected, got) of the first difference, or None."""
    best: tuple[int, int, str | None, str | None] | None = None
    for rank in sorted(set(ref) | set(got)):
        a, b = ref.get(rank, []), got.get(rank, [])
        for step in range(max(len(a), len(b))):
            x = a[step] if step < len(a) else None
            y = b[step] if step < len(b) else None
            if x != y:
                if best is None or (step, rank) < best[:2]:
                    best = (step, rank, x, y)
                break
    return best


def _label_at(run: dict[str, Any], step: int) -> str:
    """The policy label that ran ``step`` of ``run``: a switched run's block (``ab
    --switch-every``), else the run's policy."""
    order, every = run.get("block_order"), run.get("switch_every")
    if order and every:
        return str(order[(step // int(every)) % len(order)])
    return str(run["policy"])


def check_digests(runs: Sequence[dict[str, Any]]) -> DigestCheck:
    """Compare the ok runs' per-step digests (run records as in ``ab.json``)."""
    ok = [r for r in runs if r.get("status") == "ok"]
    digested = [r for r in ok
                if any(int(k.get("digest_calls") or 0) for k in r.get("ranks", []))]
    if not digested:
        in_window = any(int(k.get("digest_in_window") or 0)
                        for r in ok for k in r.get("ranks", []))
        why = ("no run finished ok" if not ok else
               "no step outside the timed window was digested: the job called profplug.digest "
               "only in timed steps (use --skip 1 or more: the warm-up steps are checked)"
               if in_window else
               "nothing was digested: the job never called profplug.digest (with Megatron-"
               "Core: broadcast_from_last_pipeline_stage is digested by itself)")
        return DigestCheck(identical=None, note=why)
    ref = digested[0]
    ref_steps = {int(k["rank"]): _steps(k) for k in ref["ranks"]}
    check = DigestCheck(identical=True, compared_runs=len(ok), reference_run=ref["index"],
                        digested_steps=sum(1 for s in zip(*ref_steps.values(), strict=False)
                                           if all(d is not None for d in s)))
    for run in ok:
        if run is ref:
            continue
        diff = _first_difference(ref_steps, {int(k["rank"]): _steps(k) for k in run["ranks"]})
        if diff is None:
            continue
        step, rank, expected, got = diff
        check.mismatches.append(Mismatch(
            run=run["index"], round=run["round"], policy=_label_at(run, step), step=step,
            rank=rank, expected=expected, got=got, reference_run=ref["index"],
            reference_round=ref["round"], reference_policy=_label_at(ref, step)))
    check.identical = not check.mismatches
    return check
