"""A what-if held against a measured run of the other policy (``whatif RUN --against OTHER``).

Per rank, the predicted timeline (the dropped replay of RUN, annotations moved with the
replayed host calls: ``predicted_timelines``) and the measured one (OTHER, as traced)
are lined up by call. In each step (the step ranges, sorted by start; a step ends where the
next one starts) the **anchors** are: the step start; the start and the end of each
pipeline send/recv/broadcast range (named after Megatron-Core's p2p functions,
``profplug.analyzers.core.names.FUNCTIONS``, as a whole word: profplug's own ranges, with or without
their ``peer=`` payload, or Megatron's NVTX ranges; a patched synchronize's range is not one;
a range nested in one of the same name is the same call), keyed by the function's name and
its ordinal in the step; the next step's start. Only the **steady steps** count: those whose
host period is no outlier (``steps.stats.outlier_mask``, the report's rule, so the long step
of a loop boundary does not); the two runs' steady steps are lined up by their index among
them (the first ``n`` of each, ``n`` the smaller count), and every figure is a median over
them, never a step-by-step difference.

The **segments** run between consecutive anchors (ordered by their median offset from the
step start in the prediction; an anchor in fewer than half of either run's steps is left
out): per segment, its median duration in each run (over the steps that hold both of its
anchors) and the difference, predicted - measured. The segment with the largest |difference|
is where the prediction and the measurement part most (``RankAgainst.finding``).

Per rank also the step: the what-if's ``predicted_us`` and its band for a separate traced
run (OTHER is one: ``figures.Target.TRACED``, the host's speed drawn per process) against
OTHER's report step (``StepStats.period_us``, what ``profplug report`` prints): error % = (predicted -
measured) / measured * 100; inside = the measured step lies in the band. Times in us.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, ClassVar

import numpy as np
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.names import FUNCTIONS
from profplug.analyzers.core.ranges import SYNCHRONIZE
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.core.vocabulary import Basis
from profplug.analyzers.graph import dropset
from profplug.analyzers.graph.model import DropSpec, build_model
from profplug.analyzers.stalls.rank import StallOptions, analyze_rank
from profplug.analyzers.steps.stats import outlier_mask
from profplug.analyzers.whatif import figures
from profplug.analyzers.whatif.figures import Target
from profplug.analyzers.whatif.predicted_timeline import predicted_timeline_with_annotations
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult
from profplug.analyzers.whatif.simulate import replay, times_only

_CALL = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, FUNCTIONS))
                   + r")(?![A-Za-z0-9_])")
STEP, NEXT = "step", "next step"  # the first and the last anchor's names
Key = tuple[str, int, str]  # (call, ordinal in the step, "start" | "end")


@dataclass
class Segment:
    """The time between two consecutive anchors, median per step in each run (us)."""

    start: Key
    end: Key
    predicted_us: float
    measured_us: float

    @property
    def diff_us(self) -> float:
        return self.predicted_us - self.measured_us

    def where(self, repeated: frozenset[str] = frozenset()) -> str:
        """``in X``, ``after X``, ``before X``, ``from the step start to the next step``:
        ``repeated``: calls made more than once a step (then numbered, #1 ...)."""
        def name(k: Key) -> str:
            return k[0] + (f" #{k[1] + 1}" if k[0] in repeated else "")

        (a, ka), (b, kb) = (self.start[0], self.start[2]), (self.end[0], self.end[2])
        if a == b and self.start[1] == self.end[1] and (ka, kb) == ("start", "end"):
            return f"in {name(self.start)}"
        if a == STEP:
            return "the whole step" if b == NEXT else f"before {name(self.end)}"
        if ka == "end":
            return f"after {name(self.start)}" + ("" if b == NEXT or kb != "start"
                                                   else f" (until {name(self.end)})")
        return f"between {name(self.start)} and {name(self.end)}"

    def to_dict(self, repeated: frozenset[str] = frozenset()) -> dict[str, Any]:
        return {"from": list(self.start), "to": list(self.end), "where": self.where(repeated),
                "predicted_us": round(self.predicted_us, 3),
                "measured_us": round(self.measured_us, 3), "diff_us": round(self.diff_us, 3)}


@dataclass
class RankAgainst:
    """One rank: the predicted step against the measured one, and the segments (us)."""

    rank: int
    predicted_us: float | None  # the what-if's predicted step (None: no step basis)
    band_pct: float | None  # +- around predicted_us for a separate traced run; None: none
    measured_us: float | None  # OTHER's report step (period_us); None: no steps
    n_steps: int  # steady steps lined up (the smaller count of the two runs)
    # the host step (step start to the next step's start), median over those steps
    predicted_host_us: float | None = None
    measured_host_us: float | None = None
    segments: list[Segment] = field(default_factory=list)
    repeated: frozenset[str] = frozenset()  # calls made more than once a step
    withheld: bool = False  # not judged: the runs' processes ran at different speeds

    @property
    def error_pct(self) -> float | None:
        if self.predicted_us is None or not self.measured_us:
            return None
        return 100.0 * (self.predicted_us - self.measured_us) / self.measured_us

    @property
    def inside(self) -> bool | None:
        """Whether the measured step lies inside the prediction's band (None: not judged)."""
        if (self.predicted_us is None or self.measured_us is None or self.band_pct is None
                or self.withheld):
            return None
        lo, hi = (self.predicted_us * (1.0 + s * self.band_pct / 100.0) for s in (-1, 1))
        return lo <= self.measured_us <= hi

    def top(self, n: int | None = None) -> list[Segment]:
        """The segments by |difference|, largest first."""
        return sorted(self.segments, key=lambda s: -abs(s.diff_us))[:n]

    def sentence(self, s: Segment) -> str:
        """``rank 0, after send_to_next_pipeline_rank: predicted the host free 2,600 us
        earlier than it was (300 vs 2,900 us per step)``."""
        d = s.diff_us
        when = "earlier" if d < 0 else "later"
        return (f"rank {self.rank}, {s.where(self.repeated)}: predicted the host free "
                f"{abs(d):,.0f} us {when} than it was ({s.predicted_us:,.0f} predicted vs "
                f"{s.measured_us:,.0f} us measured per step)")

    def finding(self) -> str | None:
        """Where the prediction and the measurement part most (None: no segment)."""
        top = self.top(1)
        return self.sentence(top[0]) if top else None

    def to_dict(self) -> dict[str, Any]:
        err = self.error_pct
        return {"rank": self.rank, "predicted_us": self.predicted_us,
                "band_pct": self.band_pct, "measured_us": self.measured_us,
                "error_pct": None if err is None else round(err, 2), "inside": self.inside,
                "n_steps": self.n_steps, "predicted_host_us": self.predicted_host_us,
                "measured_host_us": self.measured_host_us, "finding": self.finding(),
                "segments": [s.to_dict(self.repeated) for s in self.segments]}


@dataclass
class AgainstResult:
    """A what-if against a measured run of the other policy (the JSON ``against`` key)."""

    key: ClassVar[str] = "against"

    label: str  # the measured run
    ranks: list[RankAgainst]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"measured": self.label, "statistic": "median over the steady steps",
                "band_for": figures.TARGET_WORDS[Target.TRACED],
                "ranks": [r.to_dict() for r in self.ranks], "warnings": list(self.warnings)}


@dataclass
class WhatIfAgainst:
    """``whatif RUN --against OTHER``: the what-if and the against section."""

    whatif: WhatIfResult
    against: AgainstResult

    def to_dict(self) -> dict[str, Any]:
        return {"whatif": self.whatif.to_dict(), "against": self.against.to_dict()}


def call_name(name: str) -> str | None:
    """The p2p function a range is named after (None: not a pipeline send/recv/broadcast)."""
    if name.startswith(SYNCHRONIZE):
        return None
    m = _CALL.search(name)
    return m.group(1) if m else None


def step_anchors(tl: Timeline) -> list[dict[Key, int]]:
    """Per steady step (in order), each anchor's offset from the step start (ns)."""
    step_start_ns = np.sort(tl.step_start_ns, kind="stable")
    if step_start_ns.size < 2:
        return []
    call_of_symbol = [call_name(tl.names[k]) for k in range(len(tl.names))]
    ranges = _call_ranges(tl, call_of_symbol)
    range_start_ns, range_end_ns = tl.ann_start_ns[ranges], tl.ann_end_ns[ranges]
    range_call = [call_of_symbol[k] for k in tl.ann_name[ranges].tolist()]
    steady = np.nonzero(~outlier_mask(np.diff(step_start_ns)))[0].tolist()
    out = []
    for i in steady:
        start_ns, next_ns = int(step_start_ns[i]), int(step_start_ns[i + 1])
        anchors: dict[Key, int] = {(STEP, 0, "start"): 0, (NEXT, 0, "start"): next_ns - start_ns}
        calls_so_far: dict[str, int] = {}
        reach_ns: dict[str, int] = {}  # per call, the end of its latest range: nested = same
        first, end = np.searchsorted(range_start_ns, [start_ns, next_ns], side="left")
        for j in range(int(first), int(end)):
            call = range_call[j]
            assert call is not None
            if reach_ns.get(call, -1) >= range_end_ns[j]:
                continue
            reach_ns[call] = int(range_end_ns[j])
            ordinal = calls_so_far.get(call, 0)
            calls_so_far[call] = ordinal + 1
            anchors[(call, ordinal, "start")] = int(range_start_ns[j]) - start_ns
            anchors[(call, ordinal, "end")] = int(range_end_ns[j]) - start_ns
        out.append(anchors)
    return out


def _call_ranges(tl: Timeline, call_of_symbol: list[str | None]) -> np.ndarray:
    """The annotation rows named after a p2p function, by start (the outer one first)."""
    rows = np.array([i for i, k in enumerate(tl.ann_name.tolist()) if call_of_symbol[k]],
                    dtype=np.int64)
    if not rows.size:
        return rows
    ordered: np.ndarray = rows[np.lexsort((-tl.ann_end_ns[rows], tl.ann_start_ns[rows]))]
    return ordered


def _median_us(values: list[int]) -> float:
    return float(np.median(values)) / 1000.0


def segments(pred: list[dict[Key, int]], meas: list[dict[Key, int]]) -> list[Segment]:
    """The segments between consecutive anchors common to both runs (module docstring)."""
    n = min(len(pred), len(meas))
    pred, meas = pred[:n], meas[:n]
    if not n:
        return []

    def common(steps: list[dict[Key, int]]) -> set[Key]:
        seen: dict[Key, int] = {}
        for a in steps:
            for k in a:
                seen[k] = seen.get(k, 0) + 1
        return {k for k, c in seen.items() if 2 * c >= n}

    keys = common(pred) & common(meas)
    order = sorted(keys, key=lambda k: (k[0] == NEXT, k[0] != STEP,
                                        _median_us([a[k] for a in pred if k in a]), k))
    out = []
    for a, b in pairwise(order):
        d = [[s[b] - s[a] for s in run if a in s and b in s] for run in (pred, meas)]
        if d[0] and d[1]:
            out.append(Segment(a, b, _median_us(d[0]), _median_us(d[1])))
    return out


def _measured_step_us(tl: Timeline, options: StallOptions) -> float | None:
    steps = analyze_rank(tl, options, brief=True).steps
    return steps.period_us if steps is not None and steps.n_steps else None


def against(res: WhatIfResult, timelines: list[Timeline], other: list[Timeline],
            label: str, options: StallOptions | None = None) -> AgainstResult:
    """``res`` (the what-if of ``timelines``) against the measured run ``other``."""
    stall_options = options or StallOptions()
    predicted = {tl.rank: tl for tl in predicted_timelines(
        timelines, DropSpec(res.drop, res.callsite))}
    measured = {tl.rank: tl for tl in other if tl.n_gpu}
    ranks = sorted(predicted.keys() & measured.keys())
    warnings = []
    nothing = figures.nothing_to_drop(res)
    if nothing:  # no prediction to judge: the segments still show where the runs part
        warnings.append(f"dropping {res.dropped()} changes no step in the replay: nothing "
                        "to drop, no prediction to judge against the measured step")
    if set(predicted) != set(measured):
        warnings.append(f"{label} has ranks {sorted(measured)}, the what-if "
                        f"{sorted(predicted)}: compared ranks {ranks}")
    out = []
    for rank in ranks:
        prediction = None if nothing else next((r for r in res.ranks if r.rank == rank), None)
        rank_against = _rank_against(rank, prediction, predicted[rank], measured[rank],
                                     stall_options)
        out.append(rank_against)
        if not rank_against.segments:
            warnings.append(f"rank {rank}: no step ranges or no pipeline send/recv ranges in "
                            "both runs: no segment lined up")
    return AgainstResult(label, out, warnings)


def _rank_against(rank: int, prediction: RankWhatIf | None, predicted: Timeline,
                  measured: Timeline, options: StallOptions) -> RankAgainst:
    """One rank's :class:`RankAgainst`; ``prediction``: its what-if figures, None when
    there is no prediction to judge (nothing to drop, or the rank has none)."""
    predicted_anchors, measured_anchors = step_anchors(predicted), step_anchors(measured)
    segs = segments(predicted_anchors, measured_anchors)
    repeated = frozenset(key[0] for seg in segs for key in (seg.start, seg.end) if key[1] > 0)
    n_steps = min(len(predicted_anchors), len(measured_anchors))
    host_us = [round(_median_us([a[(NEXT, 0, "start")] for a in run[:n_steps]]), 3)
               if n_steps else None for run in (predicted_anchors, measured_anchors)]
    return RankAgainst(
        rank=rank,
        predicted_us=prediction.predicted_us
        if prediction is not None and prediction.basis == Basis.STEP else None,
        band_pct=figures.band_pct(prediction, Target.TRACED) if prediction is not None
        else None,
        measured_us=_measured_step_us(measured, options), n_steps=n_steps,
        predicted_host_us=host_us[0], measured_host_us=host_us[1], segments=segs,
        repeated=repeated)


def predicted_timelines(timelines: list[Timeline], drop: DropSpec | None = None
                        ) -> list[Timeline]:
    """Per rank with GPU work, the dropped replay as a Timeline with the annotations moved
    along with the replayed calls (``whatif --against``)."""
    memo = Memo()  # once per timeline: policy masks, launch calls, symbol kinds
    spec, _ = dropset.resolve(timelines, drop or DropSpec(), memo)
    m = build_model(timelines, spec, memo=memo)
    r = times_only(replay(m, drop=True))
    return [predicted_timeline_with_annotations(tl, m, r) for tl in timelines if tl.n_gpu]
