"""``profplug whatif`` once its options are parsed: the what-if of a run (in one process, or
where the ranks are read for big runs), at an unprofiled step (``--unprofiled``), against a
measured run (``--against``); returns the exit code."""

from __future__ import annotations

import sys
from pathlib import Path

from profplug.analyzers.commands.libwarnings import own_warnings
from profplug.analyzers.commands.outpaths import check_cache, check_outputs, stdout_or
from profplug.analyzers.commands.output import (
    check_trace_out,
    open_backend,
    output_format,
    progress_flag,
    write_page,
    write_text,
    write_trace,
)
from profplug.analyzers.compare.ab_runs import (
    device_step,
    is_ab_dir,
    load_ab,
    pick_policy,
    speedup_ci,
)
from profplug.analyzers.compare.against_run import (
    label_of,
    load_other,
    other_paths,
)
from profplug.analyzers.compare.answer import device_syncs_per_step
from profplug.analyzers.compare.process_speed import process_speed, withhold_against
from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.crossrank.analysis import CROSS_RANK_SPEC
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.render.chrometrace.export import TraceAsk
from profplug.analyzers.render.registry import check_format, render_text
from profplug.analyzers.render.timeline_data import GAPS_KEPT
from profplug.analyzers.report.analysis import Report, analyze, analyze_timelines
from profplug.analyzers.report.registry import check_drop
from profplug.analyzers.report.run_meta import find_run_meta
from profplug.analyzers.report.runsets import check_one_run
from profplug.analyzers.scale.dispatch import Backend
from profplug.analyzers.scale.load import load_timelines
from profplug.analyzers.scale.pathargs import PathsLike, check_paths, split_paths
from profplug.analyzers.scale.placement import rounds_for
from profplug.analyzers.stalls.rank import StallOptions, analyze_rank
from profplug.analyzers.steps.observer import untraced_step_us
from profplug.analyzers.whatif import (
    DropSpec,
    WhatIfResult,
    whatif,
    whatif_analysis,
    whatif_unprofiled,
)
from profplug.analyzers.whatif.against import AgainstResult, WhatIfAgainst, against
from profplug.analyzers.whatif.finding import whatif_headline
from profplug.analyzers.whatif.unprofiled import MAX_STEP_US, MIN_STEP_US, parse_ci

UNPROFILED_AUTO = "auto"


def _say_if_still_synchronizing(files: list[Path], other_files: list[Path],
                                other: list[Timeline], against_run: str) -> None:
    """``--against`` a run that still has the synchronizes the what-if drops (the same run,
    a copy, another device run): its step is no measure of the prediction; said first."""
    from profplug.analyzers.graph.dropset import policy_mask
    from profplug.analyzers.scale.fingerprint import run_fingerprint

    same = run_fingerprint(files)
    if same is not None and same == run_fingerprint(other_files):
        print(f"profplug: warning: --against {one_line(against_run)} is the same run as the "
              "one predicted (the same traces, by content): it still synchronizes; the "
              "error below is no measure of the prediction", file=sys.stderr)
        return
    n = int(sum(int(policy_mask(t).sum()) for t in other))
    if n:
        print(f"profplug: warning: --against {one_line(against_run)} still synchronizes: "
              f"{n:,} device-wide synchronize(s) inside its pipeline send/recv (a device "
              "run?); the prediction is of a run without them, so the error below is no "
              "measure of it", file=sys.stderr)


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
        raise ProfplugError(f"--unprofiled takes a step time in us, 'auto' or a profplug ab "
                            f"directory, got {one_line(value)!r}") from None


def ab_calibration(value: str | float | None
                   ) -> tuple[float, tuple[float, float] | None, tuple[float, float] | None] | None:
    """``--unprofiled AB_DIR``: ab's device median, its 95% CI and the measured policy's
    paired speedup CI (the calibration ``ab --whatif`` and ``compare RUN AB_DIR`` make, so
    all three give one prediction one band); None: not an ab directory."""
    if not isinstance(value, str) or not is_ab_dir(value):
        return None
    doc = load_ab(Path(value))
    step, ci = device_step(doc)
    return step, ci, speedup_ci(doc, pick_policy(doc))


@own_warnings
def _whatif_in_rounds(files: list[Path], drop: DropSpec, opt: StallOptions,
                   read: ReadOptions | None, backend: Backend, quiet: bool,
                   html: Path | None) -> tuple[WhatIfResult, Report] | None:
    """The what-if where the ranks are read, as a report from ``placement.ROUNDS_MIN_BYTES``
    of traces runs it (no timeline travels: docs/scale.md), with the report its page draws;
    None below, where the timelines travel and it runs here."""
    forced = whatif_analysis(drop)
    if not rounds_for([forced], files):
        return None
    rep = analyze(files, opt, run=[forced], read=read, backend=backend,
                  progress=progress_flag(quiet), keep_gaps=html is not None, gaps_per_device=GAPS_KEPT)
    res = rep.run.get(WhatIfResult.key)
    if not isinstance(res, WhatIfResult):
        raise ProfplugError(next((w for w in rep.warnings  # its failure's line
                                  if w.startswith(("what-if", "--drop-at"))),
                                 "what-if: not run"))
    res.warnings[:0] = rep.lost  # files lost with their worker
    return res, rep


def _against(res: WhatIfResult, timelines: list[Timeline], other: list[Timeline],
             files: list[Path], against_run: str, opt: StallOptions) -> AgainstResult:
    """``res`` lined up with the measured run, not judged when the two runs' processes ran
    at different speeds (their run.json and device-wide synchronizes per step:
    ``compare/process_speed.py``)."""
    def syncs(run: list[Timeline]) -> dict[int, float]:
        return device_syncs_per_step(analyze_rank(tl, opt) for tl in run if tl.n_gpu)

    label_b = label_of(against_run)
    speed = process_speed(find_run_meta(files), find_run_meta(other_paths(against_run)),
                          lambda: (syncs(timelines), syncs(other)))
    out = withhold_against(against(res, timelines, other, label_b, opt), speed,
                           label_of(str(files[0])), label_b)
    assert out is not None
    return out


def run_whatif(paths: PathsLike, *, drop: DropSpec | None = None, fmt: str | None = None,
               output: Path | None = None, html: Path | None = None,
               options: StallOptions | None = None, jobs: int | None = None,
               unprofiled_us: float | str | None = None,
               read: ReadOptions | None = None, unprofiled_ci: str | None = None,
               dask: str | None = None, quiet: bool = False, against_run: str | None = None,
               trace_out: Path | None = None, trace: TraceAsk | None = None) -> int:
    """Replay the run under ``paths`` without the chosen syncs; returns the exit code.

    ``html``: the full stall report of the run, with the what-if section in it.
    ``unprofiled_us``: the job's measured step time without a profiler (with its
    synchronizes): predict at that run's host speed (``whatif_unprofiled``); ``"auto"``: the
    untraced median step ``profplug run`` recorded in run.json (:func:`unprofiled_step_us`);
    ``unprofiled_ci``: its 95% CI, ``"LO,HI"`` us (the band as ``ab --whatif`` sets it);
    ``unprofiled_us`` a ``profplug ab`` directory: its device median, CI and paired speedup
    CI (:func:`ab_calibration`).
    ``against_run``: a traced run of the other policy to line the prediction up with
    (``whatif/against.py``): the ``against`` key / section after the what-if's.
    ``trace_out``: also the merged trace (``trace``: which part) with each rank's predicted
    timeline beside the recorded one (the replay in this process, then).
    """
    drop = check_drop(drop or DropSpec())
    cal = ab_calibration(unprofiled_us)
    if cal is not None:
        unprofiled_us = cal[0]
    unprofiled_us = unprofiled_step_us(unprofiled_us, split_paths(paths))
    fmt = output_format(fmt, output)
    fmt = check_format(WhatIfResult, fmt)
    if unprofiled_us is not None and not MIN_STEP_US <= unprofiled_us <= MAX_STEP_US:  # NaN
        raise ProfplugError("--unprofiled takes the measured unprofiled step time in us "
                            f"(from {MIN_STEP_US:g}, 1 ns, to {MAX_STEP_US:g}, one hour; got "
                            f"{unprofiled_us:g})")
    ci = parse_ci(unprofiled_ci, unprofiled_us)
    ratio = None
    if cal is not None:  # ab's device median, its CI and its paired speedup CI
        if unprofiled_ci is not None:
            raise ProfplugError("--unprofiled-ci: --unprofiled AB_DIR takes ab's own CI")
        _, ci, ratio = cal
    if unprofiled_us is not None and against_run is not None:
        raise ProfplugError("--against holds the traced prediction against a traced run; "
                            "--unprofiled predicts an unprofiled step (set it against "
                            "`profplug ab`: `profplug compare RUN AB_DIR`): give one of them")
    opt = options or StallOptions()
    files = check_paths(paths)
    against_paths = [] if against_run is None else other_paths(against_run)
    check_cache(None if read is None else read.cache_dir, [*files, *against_paths])
    other = None if against_run is None else load_other(against_paths, read)
    if other is not None and against_run is not None:
        _say_if_still_synchronizing(files, against_paths, other, against_run)
    check_outputs((stdout_or(output), html, check_trace_out(trace_out)), files)
    find_run_meta(files)  # a bad run.json: said before the read
    check_one_run(files, "whatif")
    backend = open_backend(jobs, dask)
    in_rounds: tuple[WhatIfResult, Report] | None = None
    try:
        # --against, --trace-out: the timelines here
        if unprofiled_us is None and other is None and trace_out is None:
            in_rounds = _whatif_in_rounds(files, drop, opt, read, backend, quiet, html)
        if in_rounds is None:
            timelines = load_timelines(files, read=read, backend=backend,
                                       progress=progress_flag(quiet))
    finally:
        backend.close()
    if in_rounds is not None:
        res, rep = in_rounds
    else:
        res = whatif(timelines, drop, opt, keep_predicted=trace_out is not None) \
            if unprofiled_us is None \
            else whatif_unprofiled(timelines, unprofiled_us, drop, opt, step_ci_us=ci,
                                   ratio_ci=ratio)
        if html is not None:
            rep = analyze_timelines(timelines, opt, steps=(read or ReadOptions()).steps)
            rep.meta = find_run_meta(files)
            rep.add(res, whatif_headline)
    out = res if other is None or against_run is None else WhatIfAgainst(
        res, _against(res, timelines, other, files, against_run, opt))
    write_text(render_text(out, fmt), output)
    if html is not None:
        if isinstance(out, WhatIfAgainst):  # the page holds what the terminal shows
            rep.add(out.against)
        rep.command = "whatif"
        write_page(rep, html)
    if trace_out is not None:
        _write_trace(timelines, res, opt, read, trace_out, trace)
    return 0


def _write_trace(timelines: list[Timeline], res: WhatIfResult, opt: StallOptions,
                 read: ReadOptions | None, path: Path, trace: TraceAsk | None) -> None:
    """The merged trace of the what-if: its prediction beside each rank, with the stall
    analyses and the cross-rank one drawn in (``--trace-out``)."""
    traced = analyze_timelines(timelines, opt, run=[CROSS_RANK_SPEC],
                               steps=(read or ReadOptions()).steps)
    traced.add(res, whatif_headline)
    traced.timelines = timelines
    write_trace([("", traced)], path, trace or TraceAsk())
