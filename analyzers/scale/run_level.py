"""The run-level analyses that run in rounds where the ranks are read: every analysis whose
spec declares ``rounds`` (``core.analysis_spec.RoundsCapability``), all in the same rounds,
so that no rank's timeline travels to the client (docs/scale.md, "What runs where").

Round one rides on the report's own read (:class:`FirstRound`, a step of each file's task):
for each rank with GPU work its comm view (``graph.commview``: its NCCL kernels) and each
analysis's first-round part. The client makes the run's :class:`~.run_views.RunViews` (the
views, their matching and partners, made once for all) and asks each analysis its next move
(``plan``): done, the run in one process after all, or more of the ranks (``Asks``). Each
further round sends each file one task with every analysis's steps for its ranks (the worker
reads the file again, through the per-rank cache when there is one), and gives each
analysis its ranks' values (``then``), until every analysis is done. The client holds no
rank's timeline.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from profplug.analyzers.core.analysis_spec import (
    AnalysisSpec,
    Asks,
    Done,
    FirstPart,
    NeedsTimelines,
    Next,
)
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.optional import Ok, Outcome, TaskError, guarded
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.commview import CommView, comm_view
from profplug.analyzers.graph.run_views import RunViews
from profplug.analyzers.scale.dispatch import Backend, RankTask, TaskStep, gather
from profplug.analyzers.stalls.rank import RankResult, StallOptions

FIRST = "first round"  # the name of round one's step in a task (``RankTask.steps``)


@dataclass(frozen=True)
class RankFirst:
    """A rank's round one: its comm view, and each analysis's first-round part by name."""

    rank: int
    view: CommView
    parts: dict[str, Outcome]


@dataclass(frozen=True)
class FirstRound:
    """Round one's step of each rank with GPU work (module docstring): ``parts`` are the
    analyses' (name, first-round part), in registry order."""

    parts: tuple[tuple[str, FirstPart], ...]
    needs_stalls = False

    def __call__(self, tl: Timeline, stall: RankResult | None) -> RankFirst | None:
        if not tl.n_gpu:
            return None
        view = comm_view(tl)
        out: dict[str, Outcome] = {}
        for name, part in self.parts:
            trim_large(tl.n_events)  # each part starts from what is live (a worker's peak)
            out[name] = guarded(part, tl, view)
        return RankFirst(tl.rank, view, out)


def first_round(specs: list[AnalysisSpec]) -> tuple[TaskStep, ...]:
    """The step round one adds to each file's task, for the analyses ``specs`` in rounds."""
    parts = tuple((s.name, s.rounds.first_part()) for s in specs if s.rounds is not None)
    step: TaskStep = (None, FIRST, FirstRound(parts))
    return (step,)


@dataclass
class RoundsResults:
    """Per analysis name, its :class:`Done`; ``fallback``: an analysis needs the run in one
    process after all (nothing was made)."""

    done: dict[str, Done] = field(default_factory=dict)
    fallback: bool = False


def run_rounds(
    specs: list[AnalysisSpec],
    firsts: dict[int, Outcome],
    tasks: dict[int, RankTask],
    backend: Backend,
    options: StallOptions,
    all_ranks: list[int],
    *,
    n_events: int = 0,
    keep_gaps: bool = False,
) -> RoundsResults:
    """The analyses ``specs`` (each with ``rounds``) from round one's values ``firsts`` (per
    rank: its :class:`RankFirst`, None without GPU work, or its ``TaskError``); ``tasks``:
    per rank, the task that read it; ``all_ranks``: every rank read; ``n_events``: the
    run's API calls + GPU ops; ``keep_gaps``: a page is drawn."""
    out = RoundsResults()
    bad = next((v for v in firsts.values() if isinstance(v, TaskError)), None)
    if bad is not None:  # a rank's round one failed: no analysis in rounds has the run
        out.done = {s.name: Done(None, TaskError(bad.kind, bad.line(s.label))) for s in specs}
        return out
    ranks = sorted(
        (v.value for v in firsts.values() if isinstance(v, Ok) and v.value is not None),
        key=lambda f: f.rank,
    )
    run = RunViews([f.view for f in ranks], options, all_ranks, n_events, keep_gaps)
    moves: dict[str, Next] = {}
    for spec in specs:
        assert spec.rounds is not None
        parts = {f.rank: f.parts[spec.name] for f in ranks}
        moves[spec.name] = _next(spec, guarded(spec.rounds.plan, run, parts))
    label = {s.name: s.label for s in specs}
    while True:
        if any(isinstance(m, NeedsTimelines) for m in moves.values()):
            out.fallback = True
            return out
        asked = {name: m for name, m in moves.items() if isinstance(m, Asks)}
        if not asked:
            break
        moves.update(_round(asked, label, tasks, backend))
    out.done = {name: m for name, m in moves.items() if isinstance(m, Done)}
    return out


def _next(spec: AnalysisSpec, got: Outcome) -> Next:
    """An analysis's move, or its failure as its end."""
    if isinstance(got, TaskError):
        return Done(None, TaskError(got.kind, got.line(spec.label)))
    move: Next = got.value
    return move


def _round(
    asked: dict[str, Asks], label: dict[str, str], tasks: dict[int, RankTask], backend: Backend
) -> dict[str, Next]:
    """One further round: each file's ranks' steps sent to where the file is read, and each
    analysis's next move from its ranks' values."""
    by_file: dict[int, list[TaskStep]] = defaultdict(list)
    for name, a in asked.items():
        for rank, step in a.steps.items():
            by_file[tasks[rank].index].append((rank, name, step))
    first = {t.index: t for t in tasks.values()}
    again = [
        replace(
            first[i],
            keep_timeline=False,
            keep_gaps=False,
            send_stalls=False,
            stall=first[i].stall if any(s.needs_stalls for _, _, s in steps) else None,
            steps=tuple(steps),
            parts=(),
        )
        for i, steps in sorted(by_file.items())
    ]
    try:
        results = gather(again, backend)
    except ProfplugError as exc:  # a trace that changed or went since the first round
        return {
            name: Done(None, TaskError.declined(f"{label[name]} not run: {exc}")) for name in asked
        }
    values: dict[str, dict[int, Outcome]] = defaultdict(dict)
    for r in results:
        for v in r.values:
            values[v.name][v.rank] = v.value
    lost = next((r.lost for r in results if r.lost), "no part came back")
    return {name: _next_of(label[name], a, values[name], lost) for name, a in asked.items()}


def _next_of(label: str, a: Asks, values: dict[int, Outcome], lost: str) -> Next:
    got = guarded(a.then, values, lost)
    if isinstance(got, TaskError):
        return Done(None, TaskError(got.kind, got.line(label)))
    return got.value
