"""What ``profplug report``, ``compare`` and ``whatif`` do once their options are parsed.

Read, analyze, render through ``render.registry``, write to a file or stdout, and return the
exit code. The CLI modules (``profplug/cli``) and ``profplug run`` (``session/launch.py``)
call these; nothing here sees argv. Warnings for the user go to stderr, one line each.
"""

from __future__ import annotations

import sys
from pathlib import Path

from profplug.analyzers.commands.libwarnings import own_warnings
from profplug.analyzers.commands.outpaths import check_outputs, is_stdout, stdout_or
from profplug.analyzers.compare.ab_runs import (
    AbComparison,
    compare_ab,
    device_step,
    is_ab_dir,
    load_ab,
    pick_policy,
    speedup_ci,
)
from profplug.analyzers.compare.against_run import (
    compare_against,
    label_of,
    load_other,
    other_paths,
)
from profplug.analyzers.compare.reports import Comparison, compare
from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank import cross_rank_analysis
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.render.registry import PAGE, check_format, render_text
from profplug.analyzers.render.timeline_data import GAPS_KEPT
from profplug.analyzers.report.analysis import Report, RunAnalyzer, analyze, analyze_timelines
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.scale.dispatch import Backend, LocalBackend
from profplug.analyzers.scale.load import PathsLike, load_timelines
from profplug.analyzers.scale.pathargs import check_paths, run_paths, split_paths
from profplug.analyzers.scale.placement import spreading
from profplug.analyzers.stalls.hostonly import host_only
from profplug.analyzers.stalls.rank import RankResult, StallOptions
from profplug.analyzers.steps.observer import untraced_step_us
from profplug.analyzers.whatif import (
    DROP_ALL,
    DROP_DEVICE,
    DROP_POLICY,
    DropSpec,
    WhatIfResult,
    whatif,
    whatif_analysis,
    whatif_unprofiled,
)
from profplug.analyzers.whatif.against import WhatIfAgainst, against
from profplug.analyzers.whatif.unprofiled import MAX_STEP_US, MIN_STEP_US, parse_ci

DROPS = (DROP_POLICY, DROP_DEVICE, DROP_ALL)
WHATIF_AUTO_MAX_EVENTS = 2_000_000  # a report's default what-if: ~2 us/event, a few seconds


def write_text(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output``, or to stdout when ``output`` is None or ``-``."""
    if output is None or is_stdout(output):
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        raise ProfplugError(f"{output}: cannot write ({exc.strerror or exc})") from None


def write_page(result: object, path: Path) -> None:
    """The HTML page of a report or a comparison, and a line on stderr saying so."""
    write_text(render_text(result, PAGE), path)
    print(f"profplug: wrote {one_line(path)}", file=sys.stderr)


def check_drop(drop: DropSpec) -> DropSpec:
    """``drop`` when its rule is one of ``DROPS``; a ProfplugError else."""
    if drop.kinds not in DROPS:
        raise ProfplugError(f"unknown --drop {drop.kinds!r} (choose from {', '.join(DROPS)})")
    return drop


def open_backend(jobs: int | None = None, dask: str | None = None) -> Backend:
    """The backend of a command: ``--dask ADDRESS`` (``daskpool``, imported only then), else
    the local pool of ``jobs`` processes. Close it when done."""
    if dask is None:
        return LocalBackend(jobs)
    from profplug.analyzers.scale.dask_backend import DaskBackend

    return DaskBackend(dask)


def _progress(quiet: bool) -> bool | None:
    """The progress line: off with ``--quiet``, else when stderr is a terminal."""
    return False if quiet else None


def whatif_if_cheap(timelines: list[Timeline], options: StallOptions,
                    drop: DropSpec | None = None,
                    ranks: list[RankResult] | None = None) -> WhatIfResult | None:
    """The what-if of a report by default (None without GPU work): run when the run has at most
    ``WHATIF_AUTO_MAX_EVENTS`` API calls + GPU ops (~2 us each); else a ProfplugError saying
    so, which the report keeps as a warning."""
    if not any(t.n_gpu for t in timelines):  # nothing to replay: the host-only summary
        return None
    n = sum(t.n_events for t in timelines)
    if n > WHATIF_AUTO_MAX_EVENTS:
        whatif_too_big(n)
    return whatif(timelines, drop or DropSpec(), options, ranks=ranks)


def whatif_too_big(n: int) -> None:
    """The default what-if declining a run of ``n`` API calls + GPU ops (a ProfplugError:
    the report's warning line)."""
    raise ProfplugError(f"what-if not run by default on {n:,} events (over "
                        f"{WHATIF_AUTO_MAX_EVENTS:,}): --whatif runs it")


def report_analyses(whatif: bool | None, cross_rank: bool = True,
                    drop: DropSpec | None = None) -> list[RunAnalyzer]:
    """The run-level analyses of a report (and of each run of a compare): the what-if
    always, never, or when cheap (``whatif`` True, False, None), dropping ``drop``
    (default: what the sync policy changes, ``whatif.dropset``); then the cross-rank
    analysis unless ``cross_rank`` is False."""
    drop = check_drop(drop or DropSpec())

    def cheap(timelines: list[Timeline], options: StallOptions,
              ranks: list[RankResult] | None = None) -> WhatIfResult | None:
        return whatif_if_cheap(timelines, options, drop, ranks)

    cheap.uses_rank_stalls = True  # type: ignore[attr-defined]
    cheap.label = "what-if"  # type: ignore[attr-defined]
    # what a report that never gathers the timelines (report.analyze) needs to know of it
    cheap.max_events = WHATIF_AUTO_MAX_EVENTS  # type: ignore[attr-defined]
    cheap.too_big = whatif_too_big  # type: ignore[attr-defined]
    # what a run-level result is cached under (``resultcache``): the analysis, its parameters
    cheap.cache_token = f"whatif auto<={WHATIF_AUTO_MAX_EVENTS} {drop!r}"  # type: ignore[attr-defined]
    forced = whatif_analysis(drop)
    forced.cache_token = f"whatif {drop!r}"  # type: ignore[attr-defined]
    # both can run where the ranks are read (``whatif.spread``; --drop-at resolved there too)
    for a in (cheap, forced):
        a.spread_drop = drop  # type: ignore[attr-defined]
    crossed = cross_rank_analysis()
    crossed.cache_token = "cross_rank"  # type: ignore[attr-defined]

    run: list[RunAnalyzer] = [] if whatif is False else [forced if whatif else cheap]
    run = [*run, host_only]  # a run without GPU work: what it has (None otherwise)
    return [*run, crossed] if cross_rank else run


@own_warnings
def run_report(paths: PathsLike, *, fmt: str = "table", output: Path | None = None,
               html: Path | None = None, options: StallOptions | None = None,
               read: ReadOptions | None = None, jobs: int | None = None,
               whatif: bool | None = None, strict: bool = False,
               cross_rank: bool = True, drop: DropSpec | None = None,
               dask: str | None = None, quiet: bool = False) -> int:
    """The stall report of the traces under ``paths``; returns the exit code.

    ``whatif``: also replay the run without its device-wide synchronizes (the ``whatif`` key
    of the JSON, a section of the table and of the HTML, and the headline's indirect cost);
    None (the default): when the run is small enough for it to take seconds at most
    (:func:`whatif_if_cheap`). ``cross_rank`` (default on; linear in the trace): bubbles,
    critical path and drain across ranks (the ``cross_rank`` key, and ``comm_transfer_us``/
    ``comm_wait_us``/``bubble_us`` in each rank). ``strict``: 1 when a trace had warnings
    or skipped events, or ranks are missing. ``drop``: what the what-if drops (``--drop``).
    ``dask``: read and analyze the ranks on that Dask cluster (``--dask``; default: local
    processes); ``quiet``: no progress line.
    """
    check_format(Report, fmt)
    files = check_paths(paths)
    check_outputs((stdout_or(output), html), files)
    find_run_meta(files)  # a run.json it cannot use: said now, not after the whole read
    backend = open_backend(jobs, dask)
    try:
        # the idle gaps travel back only for a page, and no more than it draws
        rep = analyze(files, options, read=read, run=report_analyses(whatif, cross_rank, drop),
                      backend=backend, progress=_progress(quiet), keep_gaps=html is not None,
                      gaps_per_device=GAPS_KEPT)
    finally:
        backend.close()
    write_text(render_text(rep, fmt), output)
    if html is not None:
        write_page(rep, html)
    problems = [f"rank {r.rank}: {w}" for r in rep.ranks for w in r.warnings]
    problems += rep.warnings
    missing = rep.meta.get("missing_ranks")
    if missing:  # profplug run: ranks of the world that left no trace (SIGKILL, OOM...)
        print(f"profplug: warning: missing ranks: {one_line(missing)} (run.json: no trace "
              "for them)", file=sys.stderr)
    if fmt != "table":  # the table shows them itself
        for p in problems:
            print(f"profplug: warning: {one_line(p)}", file=sys.stderr)
    trace_problems = any(r.warnings or r.skipped for r in rep.ranks) or bool(rep.lost)
    if strict and (trace_problems or missing):
        print("profplug: --strict: the traces had warnings or skipped events", file=sys.stderr)
        return 1
    return 0


def run_label(run: str) -> str:
    """A run's default name: its directory's name, else its (first) file's stem."""
    p = Path(run.split(",")[0]) if not Path(run).exists() else Path(run)
    return p.name if p.is_dir() else p.name.split(".")[0]


@own_warnings
def run_compare(run_a: str, run_b: str, *, fmt: str = "table", output: Path | None = None,
                html: Path | None = None, options: StallOptions | None = None,
                labels: tuple[str | None, str | None] = (None, None),
                read: ReadOptions | None = None, whatif: bool | None = None,
                cross_rank: bool = True, dask: str | None = None, quiet: bool = False,
                jobs: int | None = None) -> int:
    """Two runs (see :func:`run_paths`) side by side per rank; returns the exit code.

    Each run's report is the one :func:`run_report` makes (``whatif`` and ``cross_rank``
    as there).
    """
    if is_ab_dir(run_b):  # B measured by profplug ab: the what-if against its CI
        return _compare_with_ab(run_a, run_b, fmt=fmt, output=output, html=html,
                                options=options, labels=labels, read=read)
    check_format(Comparison, fmt)
    opt = options or StallOptions()
    # the same analyses as `profplug report`, so each side is that run's report
    run = report_analyses(whatif, cross_rank)
    paths_a, paths_b = run_paths(run_a), run_paths(run_b)
    check_outputs((stdout_or(output), html), [*paths_a, *paths_b])
    find_run_meta(paths_a), find_run_meta(paths_b)  # a bad run.json: said before the read
    backend = open_backend(jobs, dask)
    try:
        # each big run's run-level analyses where its ranks are read, as its report
        # (``spreading``)
        rep_a, rep_b = (analyze(p, opt, read=read, run=run, backend=backend,
                                progress=_progress(quiet), keep_gaps=html is not None,
                                gaps_per_device=GAPS_KEPT)
                        for p in (paths_a, paths_b))
    finally:
        backend.close()
    cmp = compare(rep_a, rep_b, labels[0] or run_label(run_a), labels[1] or run_label(run_b))
    cmp.against = compare_against(rep_a.run.get("whatif"), paths_a, paths_b, cmp.label_b, opt,
                                  read)  # A's what-if lined up with B by call (timelines)
    if fmt != "table":  # the table leads with them itself
        for m in cmp.mismatches:
            print(f"profplug: warning: {one_line(m)}", file=sys.stderr)
    write_text(render_text(cmp, fmt), output)
    if html is not None:
        write_page(cmp, html)
    return 0


UNPROFILED_AUTO = "auto"


def unprofiled_step_us(value: str | float | None, paths: PathsLike) -> float | None:
    """``--unprofiled``: a step time in us, or ``auto``: the untraced median step that
    ``profplug run`` measured around its window (run.json's ``observer``)."""
    if value is None or isinstance(value, (int, float)):
        return value
    if value.strip().lower() == UNPROFILED_AUTO:
        us = untraced_step_us(find_run_meta(paths))
        if us is None:
            raise ProfplugError("--unprofiled auto: no untraced step time in the run's "
                                "run.json (a `profplug run` with a window and steps before or "
                                "after it records one); give the step time in us")
        print(f"profplug: --unprofiled auto: the untraced median step of run.json, "
              f"{us:,.1f} us", file=sys.stderr)
        return us
    try:
        return float(value)
    except ValueError:
        raise ProfplugError(f"--unprofiled takes a step time in us or 'auto', got "
                            f"{one_line(value)!r}") from None


def _compare_with_ab(run_a: str, run_b: str, *, fmt: str, output: Path | None,
                     html: Path | None, options: StallOptions | None,
                     labels: tuple[str | None, str | None], read: ReadOptions | None) -> int:
    """``compare A AB_DIR``: A's what-if at ab's unprofiled device step against ab's
    measured policy (``compareab``)."""
    check_format(AbComparison, fmt)
    check_outputs((stdout_or(output), html), [*run_paths(run_a), Path(run_b)])
    doc = load_ab(Path(run_b))
    policy = pick_policy(doc)
    dev_us, dev_ci = device_step(doc)
    ratio = speedup_ci(doc, policy)
    opt = options or StallOptions()

    def unprofiled(timelines: list[Timeline], o: StallOptions) -> WhatIfResult:
        return whatif_unprofiled(timelines, dev_us, DropSpec(), o, step_ci_us=dev_ci,
                                 ratio_ci=ratio)

    rep_a = analyze(run_paths(run_a), opt, read=read, run=[unprofiled])
    res = compare_ab(rep_a, doc, labels[0] or run_label(run_a), labels[1] or run_label(run_b),
                     policy, dev_us)
    write_text(render_text(res, fmt), output)
    if html is not None:
        write_page(res, html)
    return 0


@own_warnings
def _spread_whatif(files: list[Path], drop: DropSpec, opt: StallOptions,
                   read: ReadOptions | None, backend: Backend, quiet: bool,
                   html: Path | None) -> tuple[WhatIfResult, Report] | None:
    """The what-if where the ranks are read, as a report from ``spreading.SPREAD_MIN_BYTES``
    of traces runs it (no timeline travels: docs/scale.md), with the report its page draws;
    None below, where the timelines travel and it runs here."""
    forced = whatif_analysis(drop)
    forced.spread_drop = drop  # type: ignore[attr-defined]
    if spreading([forced], False, files) is None:
        return None
    rep = analyze(files, opt, run=[forced], read=read, backend=backend,
                  progress=_progress(quiet), keep_gaps=html is not None, gaps_per_device=GAPS_KEPT)
    res = rep.run.get("whatif")
    if not isinstance(res, WhatIfResult):
        raise ProfplugError(next((w for w in rep.warnings  # its failure's line
                                  if w.startswith(("what-if", "--drop-at"))),
                                 "what-if: not run"))
    res.warnings[:0] = rep.lost  # files lost with their worker
    return res, rep


def run_whatif(paths: PathsLike, *, drop: DropSpec | None = None, fmt: str = "table",
               output: Path | None = None, html: Path | None = None,
               options: StallOptions | None = None, jobs: int | None = None,
               unprofiled_us: float | str | None = None,
               read: ReadOptions | None = None, unprofiled_ci: str | None = None,
               dask: str | None = None, quiet: bool = False, against_run: str | None = None
               ) -> int:
    """Replay the run under ``paths`` without the chosen syncs; returns the exit code.

    ``html``: the full stall report of the run, with the what-if section in it.
    ``unprofiled_us``: the job's measured step time without a profiler (with its
    synchronizes): predict at that run's host speed (``whatif_unprofiled``); ``"auto"``: the
    untraced median step ``profplug run`` recorded in run.json (:func:`unprofiled_step_us`);
    ``unprofiled_ci``: its 95% CI, ``"LO,HI"`` us (the band as ``ab --whatif`` sets it).
    ``against_run``: a traced run of the other policy to line the prediction up with
    (``whatif/against.py``): the ``against`` key / section after the what-if's.
    """
    drop = check_drop(drop or DropSpec())
    unprofiled_us = unprofiled_step_us(unprofiled_us, split_paths(paths))
    check_format(WhatIfResult, fmt)
    if unprofiled_us is not None and not MIN_STEP_US <= unprofiled_us <= MAX_STEP_US:  # NaN
        raise ProfplugError("--unprofiled takes the measured unprofiled step time in us "
                            f"(from {MIN_STEP_US:g}, 1 ns, to {MAX_STEP_US:g}, one hour; got "
                            f"{unprofiled_us:g})")
    ci = parse_ci(unprofiled_ci, unprofiled_us)
    opt = options or StallOptions()
    files = check_paths(paths)
    other = None if against_run is None else load_other(other_paths(against_run), read)
    check_outputs((stdout_or(output), html), files)
    find_run_meta(files)  # a bad run.json: said before the read
    backend = open_backend(jobs, dask)
    spread: tuple[WhatIfResult, Report] | None = None
    try:
        if unprofiled_us is None and other is None:  # --against: the timelines here
            spread = _spread_whatif(files, drop, opt, read, backend, quiet, html)
        if spread is None:
            timelines = load_timelines(files, read=read, backend=backend,
                                       progress=_progress(quiet))
    finally:
        backend.close()
    if spread is not None:
        res, rep = spread
    else:
        res = whatif(timelines, drop, opt) if unprofiled_us is None \
            else whatif_unprofiled(timelines, unprofiled_us, drop, opt, step_ci_us=ci)
        if html is not None:
            rep = analyze_timelines(timelines, opt, steps=(read or ReadOptions()).steps)
            rep.meta = find_run_meta(files)
            rep.add(res)
    out = res if other is None or against_run is None else WhatIfAgainst(
        res, against(res, timelines, other, label_of(against_run), opt))
    write_text(render_text(out, fmt), output)
    if html is not None:
        rep.command = "whatif"
        write_page(rep, html)
    return 0
