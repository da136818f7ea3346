"""Two runs side by side, per rank (e.g. device-wide synchronize vs event waits).

Times in us, taken from each run's report (so they equal its JSON report). Definitions:

- ``step_us``: mean GPU span of a complete step (``StepStats.period_us``); ``None``
  when the rank has no step ranges. Speed is compared only on step time: profiling windows
  of two runs hold different amounts of work, so their lengths say nothing about speed.
- ``faster``: the label of the run with the smaller ``step_us``; ``diff_us`` = slower step -
  faster step (>= 0); ``diff_pct`` = ``diff_us`` / slower step * 100 (the time saved): every
  percentage of a difference in compare is of the slower run's step, and says so.
- ``device_sync_share`` = device_sync idle per step of the slower run /  ``diff_us``: how
  much of the step-time difference the slower run's device-wide-sync idle accounts for. It
  can exceed 1 (the other run may spend part of that time idle for other causes) and is
  ``None`` when the steps are equally long or unknown.
- ``host_blocked_us``: host time inside blocking sync calls (device + event kinds).
- deltas are ``b - a``, worked out in whole ns (``noise.ns``) and divided last.
- ``noise``: per rank and for the pipeline, the difference tested against the runs' per-step
  spread and a block bootstrap over steps (``compare.noise``); when it is not beyond the noise
  the verdict is "no difference beyond the noise: B - A = ..." and no share of it is printed.
- ``speed``: whether the two processes ran at one speed (run.json's traced and untraced
  steps, the runs' device-wide synchronizes per step: ``compare.process_speed``); when they did
  not, no verdict names a winner, the answer does not judge the prediction, and a warning
  says why;
- ``against``: A's what-if lined up with B by call, per rank (``whatif/against.py``);
- ``answer``: A's what-if prediction against B's measured step (``compare.answer``), and
  ``mismatches``: how the runs differ besides the policy (command, ranks, steps, shape).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from profplug.analyzers.compare.answer import (
    Answer,
    device_syncs_per_step,
    mismatches,
    whatif_answer,
)
from profplug.analyzers.compare.guard import guard, with_caveat
from profplug.analyzers.compare.noise import (
    NoiseTest,
    ns,
    ranks_noise,
    runs_noise,
    shown_diff_us,
)
from profplug.analyzers.compare.process_speed import ProcessSpeed, process_speed
from profplug.analyzers.core.vocabulary import Basis, SyncKind
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.result import GPU_TIME_FIELDS, GpuTime, RankResult, flat_dict
from profplug.analyzers.steps.runstep import compare_steps_line, run_step

if TYPE_CHECKING:
    import pandas as pd
    from profplug.analyzers.report.analysis import Report
    from profplug.analyzers.whatif.against import AgainstResult

SIDE_NUMBERS = ("stream_wait_us", "host_blocked_us")  # besides the GPU time
NO_WINNER = "no winner, the processes ran at different speeds"  # process_speed.py


@dataclass
class RankSide:
    """One rank of one run (us; counts per sync kind: device, event, stream_wait)."""

    step_us: float | None
    n_steps: int
    gpu: GpuTime  # as in the run's JSON report
    idle_by_cause_us: dict[str, float]
    idle_per_step_us: dict[str, float] | None
    stream_wait_us: float
    sync_counts: dict[str, int]
    host_blocked_us: float


@dataclass
class RankComparison:
    rank: int
    a: RankSide | None  # None: the rank is missing from that run
    b: RankSide | None
    faster: str | None  # label of the faster run; None when unknown or equal
    diff_us: float | None  # slower step - faster step
    diff_pct: float | None  # diff_us / slower step * 100
    device_sync_share: float | None  # slower run's device_sync idle per step / diff_us
    delta: dict[str, float]  # b - a, for every number both sides have
    noise: NoiseTest | None = None  # the step-time difference against the noise
    speeds_differ: bool = False  # the runs' processes ran at different speeds: no winner

    def shown_diff_us(self) -> float | None:
        """|B - A| of the two steps as the text prints them (``noise.shown_diff_us``)."""
        if self.a is None or self.b is None or self.a.step_us is None or self.b.step_us is None:
            return None
        return abs(shown_diff_us(self.a.step_us, self.b.step_us))

    def verdict(self, label_a: str, label_b: str) -> str:
        """One plain sentence: who is faster and by how much, or that the difference is
        within the noise (then no share of it)."""
        if self.a is None or self.b is None:
            return f"only in {label_a if self.b is None else label_b}"
        if self.a.step_us is None or self.b.step_us is None:
            return "no step ranges: speed not compared"
        if self.speeds_differ:
            d = shown_diff_us(self.a.step_us, self.b.step_us)
            return (f"{NO_WINNER}: " + (self.noise.difference(label_a, label_b)
                                        if self.noise is not None
                                        else f"B - A = {d:+,.1f} us/step"))
        if self.noise is not None and not self.noise.resolved:
            return self.noise.sentence(label_a, label_b)
        if self.faster is None:
            return "same step time"
        slower = label_b if self.faster == label_a else label_a
        s = (f"{self.faster} faster by {self.shown_diff_us():,.1f} us/step "
             f"({self.diff_pct:.1f}% of {slower}'s step)")
        if self.device_sync_share is not None:
            s += f"; {slower}'s device_sync idle = {100 * self.device_sync_share:.0f}% of it"
        return s


@dataclass
class Comparison:
    label_a: str
    label_b: str
    report_a: Report
    report_b: Report
    ranks: list[RankComparison]
    noise: NoiseTest | None = None  # the pipeline's step time against the noise
    answer: Answer | None = None  # A's what-if against B's measured step
    mismatches: list[str] = field(default_factory=list)
    against: AgainstResult | None = None  # A's what-if lined up with B by call (against.py)
    speed: ProcessSpeed | None = None  # the two processes' speeds (run.json; process_speed)

    def verdict(self) -> str:
        """The pipeline's verdict: who is faster beyond the noise, or that nobody is (also
        when the two processes ran at different speeds)."""
        if self.noise is None:
            return "too few steps to compare step times"
        if self.speed is not None and self.speed.differs:
            return f"{NO_WINNER}: {self.noise.difference(self.label_a, self.label_b)}"
        return self.noise.sentence(self.label_a, self.label_b)

    def steps_line(self) -> str:
        """Each run's step in words (``runstep``: as in ``a.step`` / ``b.step``)."""
        return compare_steps_line(run_step(self.report_a.ranks), run_step(self.report_b.ranks))

    def to_dict(self) -> dict[str, Any]:
        """JSON: both full reports (schema v1) plus the per-rank comparison."""
        return {"version": 1, "kind": "compare",
                "answer": None if self.answer is None else {
                    **self.answer.to_dict(),
                    "sentence": self.answer.sentence(self.label_a, self.label_b)},
                "noise": None if self.noise is None else self.noise.to_dict(),
                "speed": None if self.speed is None else {
                    **self.speed.to_dict(),
                    "sentence": self.speed.sentence(self.label_a, self.label_b)},
                "verdict": self.verdict(), "mismatches": list(self.mismatches),
                "against": None if self.against is None else self.against.to_dict(),
                "a": {"label": self.label_a, "step": run_step(self.report_a.ranks),
                      "report": self.report_a.to_dict()},
                "b": {"label": self.label_b, "step": run_step(self.report_b.ranks),
                      "report": self.report_b.to_dict()},
                "ranks": [{**asdict(r), "a": _side_dict(r.a), "b": _side_dict(r.b),
                           "noise": None if r.noise is None else r.noise.to_dict(),
                           "verdict": r.verdict(self.label_a, self.label_b)}
                          for r in self.ranks]}


def _side_dict(side: RankSide | None) -> dict[str, Any] | None:
    return None if side is None else flat_dict(side)


def rank_side(r: RankResult) -> RankSide:
    """The numbers of one rank, rounded like the JSON report (us)."""
    steps = r.steps if r.steps is not None and r.steps.n_steps else None
    counts: dict[str, int] = dict.fromkeys(SyncKind, 0)
    blocked = 0.0
    for s in r.syncs:
        counts[s.kind] = counts.get(s.kind, 0) + s.count
        if s.kind in (SyncKind.DEVICE, SyncKind.EVENT):
            blocked += s.host_blocked_us
    return RankSide(
        step_us=steps.period_us if steps else None,
        n_steps=steps.n_steps if steps else 0,
        gpu=r.gpu_time(),
        idle_by_cause_us={k: round(v, 3) for k, v in r.idle_by_cause_us().items()},
        idle_per_step_us=dict(steps.idle_per_step_us) if steps else None,
        stream_wait_us=round(r.stream_wait_us, 3), sync_counts=counts,
        host_blocked_us=round(blocked, 3))


def diff_us(a_us: float, b_us: float) -> float:
    """B - A of two figures in us (3 decimals: whole ns), subtracted in whole ns."""
    return (ns(b_us) - ns(a_us)) / 1000.0


def _delta(a: RankSide, b: RankSide) -> dict[str, float]:
    d: dict[str, float] = {}
    if a.step_us is not None and b.step_us is not None:
        d["step_us"] = diff_us(a.step_us, b.step_us)
    for k in GPU_TIME_FIELDS:
        d[k] = diff_us(getattr(a.gpu, k), getattr(b.gpu, k))
    for k in SIDE_NUMBERS:
        d[k] = diff_us(getattr(a, k), getattr(b, k))
    for c in CAUSES:
        d[f"{c}_us"] = diff_us(a.idle_by_cause_us[c], b.idle_by_cause_us[c])
        if a.idle_per_step_us is not None and b.idle_per_step_us is not None:
            d[f"{c}_per_step_us"] = diff_us(a.idle_per_step_us[c], b.idle_per_step_us[c])
    for k in a.sync_counts.keys() | b.sync_counts.keys():
        d[f"{k}_syncs"] = b.sync_counts.get(k, 0) - a.sync_counts.get(k, 0)
    # keys sorted: the sync kinds come from a set, whose order follows PYTHONHASHSEED
    return dict(sorted(d.items()))


def compare_rank(rank: int, a: RankSide | None, b: RankSide | None, label_a: str,
                 label_b: str) -> RankComparison:
    if a is None or b is None:
        return RankComparison(rank, a, b, None, None, None, None, {})
    faster: str | None = None
    diff = pct = share = None
    if a.step_us is not None and b.step_us is not None and ns(a.step_us) != ns(b.step_us):
        slow = a if a.step_us > b.step_us else b
        slow_ns = max(ns(a.step_us), ns(b.step_us))
        faster = label_b if slow is a else label_a
        diff = abs(ns(b.step_us) - ns(a.step_us)) / 1000.0
        pct = round(100.0 * abs(ns(b.step_us) - ns(a.step_us)) / slow_ns, 3) \
            if slow_ns > 0 else None
        if slow.idle_per_step_us is not None and diff > 0:
            share = round(slow.idle_per_step_us["device_sync"] / diff, 4)
    return RankComparison(rank, a, b, faster, diff, pct, share, _delta(a, b))


def compare(rep_a: Report, rep_b: Report, label_a: str = "A", label_b: str = "B"
            ) -> Comparison:
    """Compare two reports rank by rank (ranks matched by number)."""
    if label_a == label_b:
        label_a, label_b = f"A:{label_a}", f"B:{label_b}"
    sides_a = {r.rank: rank_side(r) for r in rep_a.ranks}
    sides_b = {r.rank: rank_side(r) for r in rep_b.ranks}
    ranks = [compare_rank(k, sides_a.get(k), sides_b.get(k), label_a, label_b)
             for k in sorted(sides_a.keys() | sides_b.keys())]
    by_a = {r.rank: r for r in rep_a.ranks}
    by_b = {r.rank: r for r in rep_b.ranks}
    speed = process_speed(rep_a.meta, rep_b.meta, lambda: (  # run.json's steps, the syncs
        device_syncs_per_step(rep_a.ranks), device_syncs_per_step(rep_b.ranks)))
    differ = speed is not None and speed.differs
    for rc in ranks:
        if rc.rank in by_a and rc.rank in by_b:
            rc.noise = ranks_noise(by_a[rc.rank], by_b[rc.rank])
            rc.speeds_differ = differ
            if differ or (rc.noise is not None and not rc.noise.resolved):
                rc.device_sync_share = None  # no share of a non-difference
    warns, caveat = guard(rep_a, rep_b, label_a, label_b)  # before the answer (compareguard)
    if differ:
        assert speed is not None
        warns.append(speed.sentence(label_a, label_b))
    sa, sb = run_step(rep_a.ranks), run_step(rep_b.ranks)
    steps = (sa["us"], sb["us"]) if (sa["basis"] == sb["basis"] == Basis.STEP and sa["us"]
                                     and sb["us"]) else None  # B - A of the printed steps
    answer = with_caveat(whatif_answer(rep_a, rep_b), caveat)
    if differ and answer is not None:
        answer = replace(answer, withheld="the processes ran at different speeds")
    return Comparison(label_a, label_b, rep_a, rep_b, ranks, runs_noise(rep_a, rep_b, steps),
                      answer, [*warns, *mismatches(rep_a, rep_b, label_a, label_b)],
                      speed=speed)


def comparison_frame(cmp: Comparison) -> pd.DataFrame:
    """One row per rank and run (column ``run`` = label), plus verdict columns (us)."""
    import pandas as pd

    rows = []
    for rc in cmp.ranks:
        for label, side in ((cmp.label_a, rc.a), (cmp.label_b, rc.b)):
            if side is None:
                continue
            row: dict[str, Any] = {"rank": rc.rank, "run": label}
            for k, v in flat_dict(side).items():
                if k == "idle_by_cause_us":
                    row.update({f"{c}_us": x for c, x in v.items()})
                elif k == "idle_per_step_us":
                    row.update({f"{c}_per_step_us": x for c, x in (v or {}).items()})
                elif k == "sync_counts":
                    row.update({f"{c}_syncs": x for c, x in v.items()})
                else:
                    row[k] = v
            row.update(faster=rc.faster, diff_us=rc.diff_us, diff_pct=rc.diff_pct,
                       device_sync_share=rc.device_sync_share)
            rows.append(row)
    return pd.DataFrame(rows)
