"""The report of a run, as a value: every rank's stall analysis, and analyses of the whole run.

``analyze(paths)`` is the library entry point behind ``profplug report``; the JSON schema
(``version`` 1) is documented in README.md and is stable. Per-rank results are ``ranks``;
run-level results (``whatif``, ``cross_rank``) are ``run``, each under its key, in the report and in its
JSON. ``render.registry`` turns a report into a table, JSON, CSV or HTML.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from profplug.analyzers.core.analysis_spec import (
    AddsRankFields,
    AnalysisSpec,
    HeadlineFn,
    as_spec,
)
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.memtrim import trim_large
from profplug.analyzers.core.optional import CLOCKS, Ok, TaskError, guarded
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.dropset import DropSpec
from profplug.analyzers.readers import clocks
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.report.finding import headline, no_steps_warning
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.scale import run_level
from profplug.analyzers.scale.dispatch import Backend, LocalBackend, analyze_ranks
from profplug.analyzers.scale.load import LoadedRanks, load_ranks, load_timelines
from profplug.analyzers.scale.pathargs import PathsLike, as_paths
from profplug.analyzers.scale.placement import Placement, place, scratch_cache
from profplug.analyzers.scale.result_cache import MISS, ResultCache
from profplug.analyzers.stalls.rank import RankResult, StallOptions, flat_dict
from profplug.analyzers.stalls.sanity import check_sum_rule
from profplug.analyzers.steps import observer
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule
from profplug.analyzers.steps.runstep import run_step
from profplug.analyzers.whatif.predict import whatif
from profplug.analyzers.whatif.result import WhatIfResult

SCHEMA_VERSION = 1


class RunAnalysis(Protocol):
    """The result of an analysis over all ranks of a run (what-if, cross-rank, host-only).

    A result may also add fields to each rank's JSON object
    (``core.analysis_spec.AddsRankFields``), as the cross-rank result does.
    """

    key: ClassVar[str]  # its key in Report.run and in the JSON report

    def to_dict(self) -> dict[str, Any]:
        """Its JSON object (plain dict, list, str, number, bool or None values)."""
        ...


@runtime_checkable
class AddsReportFields(Protocol):
    """A run-level result that adds fields to the top of the JSON report, after ``step``
    (the what-if's ``predicted_step``)."""

    def report_fields(self) -> dict[str, Any]: ...


@runtime_checkable
class SaysOfTheRun(Protocol):
    """A run-level result with warnings about the whole run, which the report states first
    and the result no longer holds (the cross-rank analysis's ranks of two runs)."""

    def run_warnings(self) -> list[str]: ...


# A run-level analysis: its spec (``core.analysis_spec.AnalysisSpec``; the report's own are
# listed in ``report.registry``), or a plain function ``f(timelines, options)`` run in one
# process. Any exception it raises becomes one warning line of the report (``optional``):
# the per-rank report stands without it.
RunAnalyzer = AnalysisSpec | Callable[..., "RunAnalysis | None"]


@dataclass
class Report:
    ranks: list[RankResult]
    options: StallOptions = field(default_factory=StallOptions)
    meta: dict[str, Any] = field(default_factory=dict)  # run.json, when present
    run: dict[str, RunAnalysis] = field(default_factory=dict)  # run-level results, by key
    warnings: list[str] = field(default_factory=list)  # about the run, not one rank's trace
    lost: list[str] = field(default_factory=list)  # files lost with their worker (also warned)
    command: str = "report"  # the command whose page this is: its title ("profplug whatif")
    # every rank's Timeline, kept when asked (``analyze(keep_timelines=True)``: the merged
    # trace draws the recorded ops); not in the JSON
    timelines: list[Timeline] = field(default_factory=list, repr=False, compare=False)
    # the analyses' say in the finding (``AnalysisSpec.headline``), by their results' keys,
    # in registry order; not in the JSON
    headlines: list[tuple[str, HeadlineFn]] = field(default_factory=list, repr=False,
                                                    compare=False)
    # an analysis put every rank on one clock, or said why it cannot
    # (``AnalysisSpec.aligns_clocks``): the mixed-sources warning is then moot
    clocks_judged: bool = False

    def rank(self, r: int) -> RankResult:
        for x in self.ranks:
            if x.rank == r:
                return x
        raise KeyError(r)

    def add(self, result: RunAnalysis, headline: HeadlineFn | None = None) -> None:
        """Attach a run-level result under its key, with its analysis's say in the finding
        (``AnalysisSpec.headline``)."""
        self.run[result.key] = result
        if headline is not None:
            self.headlines.append((result.key, headline))

    def headline(self) -> str:
        """The finding in one sentence (``finding.headline``, with the analyses' say); a
        window that never opened (run.json) instead, when no trace has GPU work to blame."""
        never = observer.no_window(self.meta)
        if never and not any(r.has_gpu_work for r in self.ranks):
            return never
        said = [(fn, self.run[key]) for key, fn in self.headlines if key in self.run]
        return headline(self.ranks, said)

    def to_dict(self) -> dict[str, Any]:
        tops = {k: v for a in self.run.values() if isinstance(a, AddsReportFields)
                for k, v in a.report_fields().items()}
        return {"version": SCHEMA_VERSION, "headline": self.headline(),
                "step": run_step(self.ranks), **tops, "warnings": list(self.warnings),
                "tolerance_us": self.options.tolerance_ns / 1000.0,
                "ranks": [self._rank_json(r) for r in self.ranks],
                **{key: a.to_dict() for key, a in self.run.items()}}

    def _rank_json(self, r: RankResult) -> dict[str, Any]:
        """A rank's JSON: ``rank_dict``, plus the fields run-level results add to it."""
        d = rank_dict(r)
        for a in self.run.values():
            if not isinstance(a, AddsRankFields) or not r.has_gpu_work:
                continue
            extra = a.rank_fields(r.rank)
            keys = list(d)
            at = keys.index("idle_us") + 1
            d = {**{k: d[k] for k in keys[:at]}, **extra, **{k: d[k] for k in keys[at:]}}
            if d.get("steps") is not None:
                d["steps"] = {**d["steps"], **a.step_fields(r.rank)}
        return d


def rank_dict(r: RankResult) -> dict[str, Any]:
    d: dict[str, Any] = {
        "rank": r.rank, "source": r.source, "files": r.files, "rank_rule": r.rank_rule,
        "steps_rule": r.steps_rule,
        "has_gpu_work": r.has_gpu_work, **asdict(r.gpu_time()),
        "idle_by_cause_us": {k: round(v, 3) for k, v in r.idle_by_cause_us().items()},
        "other_reasons": r.other_reasons,
        "stream_wait_us": round(r.stream_wait_us, 3),
        "stream_waits": [asdict(s) for s in r.stream_waits],
        "syncs": [asdict(s) for s in r.syncs],
        "callsites": [asdict(c) for c in r.callsites],
        "steps": None if r.steps is None else r.steps.json_dict(),
        "devices": [flat_dict(x) for x in r.devices],
        "warnings": r.warnings, "skipped": r.skipped,
    }
    return d


def analyze_timelines(timelines: Iterable[Timeline], options: StallOptions | None = None,
                      run: Iterable[RunAnalyzer] = (), steps: StepRule = DEFAULT_STEPS,
                      ranks: list[RankResult] | None = None,
                      results: ResultCache | None = None) -> Report:
    """Every rank's stall analysis, then each run-level analysis of ``run`` over all ranks,
    in one process.

    A run-level analysis that fails (any exception; a ProfplugError such as the what-if of
    traces without GPU work, or a bug) leaves one warning line naming it, not an exception
    (``optional``); so do the call sites of a rank. ``steps``: the step rule the timelines
    were read with (for the warning when no steps were found). ``ranks``: the stall
    analyses when they were made where the ranks were read (``load.load_ranks``).
    ``results``: where run-level results are kept between runs (``result_cache``).
    """
    opt = options or StallOptions()
    tls = list(timelines)
    rep = ranks_report(analyze_ranks(tls, opt) if ranks is None else ranks, opt, steps)
    run_whole(rep, [as_spec(a) for a in run], tls, results)
    return rep


def ranks_report(ranks: list[RankResult], options: StallOptions, steps: StepRule) -> Report:
    """The report of the ranks' stall analyses, checked to add up, with its warnings (no
    steps found, call sites that failed); no run-level analysis yet."""
    check_sum_rule(ranks)  # never print figures that do not add up
    rep = Report(ranks, options)
    no_steps = no_steps_warning(rep.ranks, steps)
    if no_steps:
        rep.warnings.append(no_steps)
    rep.warnings += callsite_failures(rep.ranks)
    return rep


def run_whole(rep: Report, specs: list[AnalysisSpec], tls: list[Timeline],
              results: ResultCache | None = None, memo: Memo | None = None) -> None:
    """Run ``specs`` in this process over every rank's Timeline (their results, or their
    one-line failures, into ``rep``); ``results``: a cached result is used, a new one kept;
    ``memo``: the report's (``core.memo``), default one for these specs: the cross-rank
    analysis and the what-if share the matching, launch calls and kinds."""
    memo = memo or Memo()
    n_events = sum(tl.n_events for tl in tls)
    for spec in specs:
        result = MISS if results is None else results.get(spec)
        failed = None
        if result is MISS:
            got = guarded(spec.run, tls, rep.options, rep.ranks, memo)
            result, failed = (got.value, None) if isinstance(got, Ok) else (None, got)
            if failed is None and results is not None:
                results.put(spec, result)
        _add(rep, spec, result, failed)
        trim_large(n_events)  # its graph and replay: the next starts from what is live


def _add(rep: Report, spec: AnalysisSpec, result: Any, failed: TaskError | None) -> None:
    """A run-level analysis's result into ``rep``, or its failure as a warning line."""
    if failed is not None:
        rep.warnings.append(failed.line(spec.label))
    elif result is not None:
        rep.add(result, spec.headline)
    if spec.aligns_clocks and (result is not None or (failed is not None
                                                      and failed.kind == CLOCKS)):
        rep.clocks_judged = True


def callsite_failures(ranks: list[RankResult]) -> list[str]:
    """The ranks' call-site failures (``RankResult.callsites_failed``) as one warning."""
    failed = [(r.rank, r.callsites_failed) for r in ranks if r.callsites_failed]
    if not failed:
        return []
    which = ", ".join(str(rk) for rk, _ in failed)
    return [f"rank{'s' if len(failed) > 1 else ''} {which}: {failed[0][1]}"]


def analyze(paths: PathsLike, options: StallOptions | None = None, *,
            jobs: int | None = None, read: ReadOptions | None = None,
            step_range: str | None = None, run: Iterable[RunAnalyzer] = (),
            backend: Backend | None = None, progress: bool | None = None,
            keep_gaps: bool = True, gaps_per_device: int | None = None,
            keep_timelines: bool = False) -> Report:
    """Read the traces under ``paths`` (a path, str or Path, or several) and attribute every
    rank's GPU idle time.

    ``run``: run-level analyses to add, e.g. ``report.registry.report_analyses(None)`` or
    ``[whatif_analysis()]`` (``profplug.analyzers.whatif``); ``read``: options for the
    trace readers (the nsys executable, the step rule, the cache); ``step_range``: the host
    range that marks a step, its name or ``re:REGEX`` (as ``--step-range``; default
    ``ProfilerStep#N``, else ``profplug.step``). Each file is read once, on ``backend``
    (``dispatch``; default: the local pool of ``jobs`` processes), where its ranks' stall
    analyses and the run-level analyses' parts are made (``scale.placement``: each
    analysis in one process, by rank, or in rounds). ``keep_gaps`` False: the ranks come
    without their idle gaps (``RankResult.gaps`` empty: for a JSON, table or CSV report
    without run-level analyses, which never read them); ``gaps_per_device``: with at most so
    many per device, the longest, where no run-level analysis here reads them
    (``gaps.longest``: what a page draws). ``keep_timelines``: every analysis in one
    process, the Timelines kept in ``Report.timelines`` with every gap (``--trace-out``).
    """
    files = as_paths(paths)
    read = (read or ReadOptions()).with_step_range(step_range)
    opt = options or StallOptions()
    specs = [as_spec(a) for a in run]
    where = place(specs, files, in_rounds=not keep_timelines)
    backend = backend or LocalBackend(jobs)
    rounds = where.rounds
    with scratch_cache(read, backend) if rounds else nullcontext(read) as rd:
        whole = bool(where.whole) or keep_timelines
        got = load_ranks(files, read=rd, stall=opt, keep_timelines=whole,
                         backend=backend, progress=progress, keep_gaps=keep_gaps or whole,
                         steps=run_level.first_round(rounds) if rounds else (),
                         gaps_per_device=None if whole else gaps_per_device,
                         parts=where.parts)
        rep = _rounds_report(got, opt, specs, where, read.steps, backend, keep_gaps) \
            if rounds else None
        if rep is None and rounds:
            # the analyses need the timelines after all: the ranks read again, analyzed
            # with their gaps (the what-if's direct cost)
            again = load_ranks(files, read=rd, backend=backend, progress=False)
            results = None if rd is not read else _result_cache(again, opt, read.steps)
            rep = ranks_report(analyze_ranks(again.timelines, opt), opt, read.steps)
            _run_specs(rep, specs, where.by_rank, got, again.timelines, results)
        elif rep is None:
            rep = ranks_report(got.stalls, opt, read.steps)
            _run_specs(rep, specs, where.by_rank, got, got.timelines,
                       _result_cache(got, opt, read.steps))
            if keep_timelines:
                rep.timelines = got.timelines
    return _finished(rep, got, files)


def _result_cache(got: LoadedRanks, opt: StallOptions, steps: StepRule) -> ResultCache | None:
    """Where run-level results are kept, when the run was read whole through the cache."""
    if got.cache_keys is None or got.cache_dir is None:
        return None
    return ResultCache(got.cache_dir, got.cache_keys, (opt, steps))


def _run_specs(rep: Report, specs: list[AnalysisSpec], by_rank: list[AnalysisSpec],
               got: LoadedRanks, tls: list[Timeline], results: ResultCache | None) -> None:
    """Each of ``specs`` in order: joined from its parts (``by_rank``), else over ``tls`` (one
    memo of the report shared by all: the matching, launch calls, kinds)."""
    memo = Memo()
    for spec in specs:
        if spec in by_rank:
            _join(rep, spec, got)
        else:
            run_whole(rep, [spec], tls, results, memo)


def _finished(rep: Report, got: LoadedRanks, files: list[Path]) -> Report:
    """The report with the files lost with their worker and the run's own warnings."""
    rep.lost = got.lost
    rep.warnings[:0] = got.lost
    rep.meta = find_run_meta(files)
    rep.warnings += observer.meta_warnings(rep.meta)
    for a in rep.run.values():  # about the whole run: the report's own warnings, first
        if isinstance(a, SaysOfTheRun):
            rep.warnings[:0] = a.run_warnings()
    mixed = clocks.sources_warning(rep.ranks, rep.clocks_judged)
    if mixed is not None:
        rep.warnings.append(mixed)
    return rep


def _rounds_report(got: LoadedRanks, opt: StallOptions, specs: list[AnalysisSpec],
                   where: Placement, steps: StepRule, backend: Backend,
                   keep_gaps: bool) -> Report | None:
    """The report of ranks read with ``run_level.first_round``: the analyses in rounds, the
    others joined from their parts or run over the Timelines sent back; None when an
    analysis needs the timelines after all (a run without GPU work; a what-if whose ranks'
    coupled replay has a cycle, within the size it runs at in one process)."""
    out = run_level.run_rounds(
        where.rounds, got.values.get(run_level.FIRST, {}), got.tasks, backend, opt,
        [r.rank for r in got.stalls], n_events=got.n_events, keep_gaps=keep_gaps)
    if out.fallback:
        return None
    rep = ranks_report(got.stalls, opt, steps)
    memo = Memo()  # the report's: what the analyses run here share (the matching, kinds)
    for spec in specs:
        if spec in where.rounds:
            done = out.done.get(spec.name)
            if done is not None:
                _add(rep, spec, done.result, done.error)
        elif spec in where.by_rank:
            _join(rep, spec, got)
        else:
            run_whole(rep, [spec], got.timelines, None, memo)
    return rep


def _join(rep: Report, spec: AnalysisSpec, got: LoadedRanks) -> None:
    """A by-rank analysis's result from the parts its ranks sent, into ``rep``."""
    if spec.join is not None:
        got_ = guarded(spec.join, got.parts.get(spec.name, []), rep.ranks)
        _add(rep, spec, got_.value if isinstance(got_, Ok) else None,
             got_ if isinstance(got_, TaskError) else None)


def whatif_paths(paths: PathsLike, drop: DropSpec | None = None,
                 options: StallOptions | None = None, *, jobs: int | None = None,
                 read: ReadOptions | None = None, step_range: str | None = None
                 ) -> WhatIfResult:
    """Read the traces under ``paths`` (all ranks of one run) and run :func:`whatif.whatif`.

    ``step_range``: the host range that marks a step (as in :func:`analyze`).
    """
    read = (read or ReadOptions()).with_step_range(step_range)
    return whatif(load_timelines(paths, jobs=jobs, read=read), drop, options)
