"""From the runs of an A/B to its result: medians, CIs, speedups, verdicts, output check.

``analyze_ab(runs, ...)`` is a pure function of the run records (``ab.json``'s ``runs``; the
launcher, ``profplug.session.abrun``, makes them from each run's ``run.json``), so an A/B
can be analyzed again from its ``ab.json``. The statistics are in :mod:`.stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from profplug.analyzers.ab import stats, switched
from profplug.analyzers.ab.digestcheck import check_digests
from profplug.analyzers.ab.plan import BASELINE
from profplug.analyzers.ab.position import position_effect
from profplug.analyzers.ab.reach import not_reached
from profplug.analyzers.ab.result import AbResult, PolicySummary, RankSummary


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def _rank_series(run: dict[str, Any], key: str) -> list[list[float]]:
    return [list(k.get(key) or []) for k in sorted(run.get("ranks", []),
                                                   key=lambda k: int(k["rank"]))]


def with_medians(run: dict[str, Any]) -> dict[str, Any]:
    """The run record with its pipeline medians (``median_step_us``, ``host_median_step_us``)
    and each rank's (``ranks[i].median_step_us``)."""
    ranks = []
    for k in run.get("ranks", []):
        steps = k.get("step_us") or []
        ranks.append({**k, "median_step_us": _r(float(np.median(steps))) if steps else None})
    out = {**run, "ranks": ranks}
    out["median_step_us"] = _r(stats.run_median(_rank_series(run, "step_us")))
    out["host_median_step_us"] = _r(stats.run_median(_rank_series(run, "host_step_us")))
    return out


def _usable(run: dict[str, Any]) -> bool:
    return run.get("status") == "ok" and run.get("median_step_us") is not None


def _ci(values: list[float], resamples: int) -> tuple[float, list[float] | None]:
    """The median and its CI (None: fewer than ``stats.MIN_ROUNDS`` values)."""
    med, lo, hi = stats.median_ci(values, resamples=resamples)
    return round(med, 3), None if lo is None or hi is None else [round(lo, 3), round(hi, 3)]


def summarize(policy: str, runs: Sequence[dict[str, Any]], rounds: int,
              resamples: int) -> PolicySummary:
    """One policy's medians and CIs over its usable runs (records with medians)."""
    mine = [r for r in runs if r["policy"] == policy and _usable(r)]
    by_round: list[float | None] = [None] * rounds
    host: list[float] = []
    per_rank: dict[int, list[float]] = {}
    for r in mine:
        if 0 <= r["round"] < rounds:
            by_round[r["round"]] = r["median_step_us"]
        if r.get("host_median_step_us") is not None:
            host.append(r["host_median_step_us"])
        for k in r["ranks"]:
            if k.get("median_step_us") is not None:
                per_rank.setdefault(int(k["rank"]), []).append(k["median_step_us"])
    s = PolicySummary(policy=policy, rounds=rounds, rounds_ok=len(mine),
                      round_medians_us=by_round)
    values = [v for v in by_round if v is not None]
    if values:
        s.median_step_us, s.ci95_us = _ci(values, resamples)
    if host:
        s.host_median_step_us, s.host_ci95_us = _ci(host, resamples)
    for rank in sorted(per_rank):
        med, ci = _ci(per_rank[rank], resamples)
        s.ranks.append(RankSummary(rank, med, ci, len(per_rank[rank])))
    return s


def compare_to_baseline(s: PolicySummary, base: PolicySummary, resamples: int) -> None:
    """Fill ``s``'s speedup over ``base``, its CI, whether it is resolved, and its verdict."""
    if s.median_step_us is None or base.median_step_us is None:
        who = s.policy if s.median_step_us is None else base.policy
        s.verdict = f"{s.policy}: no result ({who} has no successful run with step times)"
        return
    sp, lo, hi, n = stats.speedup_ci(base.round_medians_us, s.round_medians_us,
                                     resamples=resamples)
    s.speedup_vs_device, s.speedup_rounds, s.paired = round(sp, 4), n, n > 0
    if lo is None or hi is None:  # too few paired rounds: no CI, no verdict
        s.verdict = verdict_line(s.policy, base.policy, sp, None, None, n, None)
        return
    s.speedup_ci95 = [round(lo, 4), round(hi, 4)]
    s.resolved = stats.resolved(lo, hi)
    s.rounds_needed = None if s.resolved else stats.rounds_needed(sp, lo, hi, n)
    s.verdict = verdict_line(s.policy, base.policy, sp, lo, hi, n, s.rounds_needed)


def _fmt(*values: float) -> list[str]:
    """Ratios with one precision: 3 decimals when all are within 10% of 1, else 2."""
    digits = 3 if all(abs(v - 1.0) < 0.095 for v in values) else 2
    return [f"{v:.{digits}f}" for v in values]


def too_few(n: int, unit: str = "round") -> str:
    """Why there is no CI: ``too few rounds for a confidence interval (2; at least 3)``."""
    return f"too few {unit}s for a confidence interval ({n}; at least {stats.MIN_ROUNDS})"


def verdict_line(policy: str, base: str, sp: float, lo: float | None, hi: float | None,
                 n: int, needed: int | None, unit: str = "round") -> str:
    """e.g. ``event: 2.13x faster than device (95% CI 2.05-2.20x, 5 rounds)``; no claim
    without a CI (fewer than ``stats.MIN_ROUNDS`` paired rounds). ``unit``: ``round``
    (separate runs) or ``switched run``."""
    rounds = f"{n} {unit}{'s' if n != 1 else ''}"
    if lo is None or hi is None:
        (x,) = _fmt(sp)
        return (f"{policy}: {too_few(n, unit)}, no verdict (measured {x}x the speed of {base}"
                f"{f' over {rounds}' if n else ', no round in common'})")
    if stats.resolved(lo, hi):
        if sp >= 1.0:
            x, a, b = _fmt(sp, lo, hi)
            return f"{policy}: {x}x faster than {base} (95% CI {a}-{b}x, {rounds})"
        x, a, b = _fmt(1 / sp, 1 / hi, 1 / lo)
        return f"{policy}: {x}x slower than {base} (95% CI {a}-{b}x, {rounds})"
    x, a, b = _fmt(sp, lo, hi)
    line = (f"{policy}: no difference from {base} resolved at this noise ({x}x, 95% CI "
            f"{a}-{b}x, {rounds})")
    if needed is None:
        return line
    more = (f"more than {needed:,}" if needed >= stats.MAX_ROUNDS_NEEDED
            else f"about {needed:,}")
    return f"{line}: {more} {unit}s needed to resolve a {abs(sp - 1.0) * 100:.1f}% difference"


def _clock(runs: Sequence[dict[str, Any]]) -> str:
    clocks = {k.get("clock") for r in runs if _usable(r) for k in r["ranks"] if k.get("clock")}
    return clocks.pop() if len(clocks) == 1 else ("mixed" if clocks else "host")


def _warnings(runs: Sequence[dict[str, Any]], summary: Sequence[PolicySummary]) -> list[str]:
    out = []
    for r in runs:
        for k in r.get("ranks", []):
            req, got = k.get("requested_steps"), len(k.get("step_us") or [])
            if r.get("status") == "ok" and req and got < req:
                out.append(f"run {r['index']} ({r['policy']}, round {r['round']}): rank "
                           f"{k['rank']}: {got} of {req} steps timed (the job ended first)")
            if k.get("timing_error"):
                out.append(f"run {r['index']}: rank {k['rank']}: {k['timing_error']}")
    for s in summary:
        if 0 < s.rounds_ok < stats.MIN_ROUNDS:
            out.append(f"{s.policy}: {s.rounds_ok} successful round"
                       f"{'s' if s.rounds_ok != 1 else ''}: {too_few(s.rounds_ok)}")
    return out


def summarize_switched(policy: str, runs: Sequence[dict[str, Any]], rounds: int,
                       resamples: int, discard: int) -> PolicySummary:
    """One label over switched runs: per run its robust step over its blocks
    (``round_medians_us``, by run), their median and bootstrap CI over runs."""
    by_round: list[float | None] = [None] * rounds
    for r in runs:
        if _usable(r) and 0 <= r["round"] < rounds:
            c = switched.run_centers(r, discard).get(policy)
            by_round[r["round"]] = None if c is None else round(c[0], 3)
    values = [v for v in by_round if v is not None]
    s = PolicySummary(policy=policy, rounds=rounds, rounds_ok=len(values),
                      round_medians_us=by_round)
    if values:
        s.median_step_us, s.ci95_us = _ci(values, resamples)
    return s


def compare_switched(s: PolicySummary, base: PolicySummary) -> None:
    """``s``'s speedup over ``base`` from the runs' within-run ratios (t over log ratios)."""
    ratios = [b / o for b, o in zip(base.round_medians_us, s.round_medians_us, strict=True)
              if b and o]
    unit = "switched run"
    if not ratios:
        s.verdict = f"{s.policy}: no result (no run with blocks of both {s.policy} and device)"
        return
    sp, lo, hi, n = switched.log_ratio_ci(ratios)
    s.speedup_vs_device, s.speedup_rounds, s.paired = round(sp, 4), n, True
    if lo is None or hi is None:
        s.verdict = verdict_line(s.policy, base.policy, sp, None, None, n, None, unit)
        return
    s.speedup_ci95 = [round(lo, 4), round(hi, 4)]
    s.resolved = stats.resolved(lo, hi)
    s.rounds_needed = None if s.resolved else stats.rounds_needed(sp, lo, hi, n)
    s.verdict = verdict_line(s.policy, base.policy, sp, lo, hi, n, s.rounds_needed, unit)


def design_line(design: str, order: str, every: int | None, discard: int) -> str:
    """Which design produced the verdicts, in words."""
    if design == "switched":
        return (f"design: policies switched every {every} steps inside each run (block order "
                f"counterbalanced across runs; first {discard} steps of each block left out)")
    return f"design: separate runs, {order} order"


def analyze_ab(runs: Sequence[dict[str, Any]], *, policies: Sequence[str], rounds: int,
               order: str = "interleaved", seed: int | None = None, skip: int | None = None,
               steps: int | None = None, command: Sequence[str] = (),
               interrupted: int | None = None, stopped: str | None = None,
               discard: int = switched.DISCARD_AFTER_SWITCH,
               resamples: int = stats.RESAMPLES) -> AbResult:
    """The A/B of ``runs`` (records in execution order, see docs/ab.md): separate runs
    (one policy per run), or switched runs (``block_order``: the policies alternate in
    blocks inside every run)."""
    records = [with_medians(r) for r in runs]
    is_switched = any(switched.is_switched(r) for r in records)
    every = next((int(r["switch_every"]) for r in records if switched.is_switched(r)), None)
    if is_switched:
        summary = [summarize_switched(p, records, rounds, resamples, discard)
                   for p in policies]
    else:
        summary = [summarize(p, records, rounds, resamples) for p in policies]
    base = next(s for s in summary if s.policy == BASELINE)
    for s in summary:
        if s is not base:
            if is_switched:
                compare_switched(s, base)
            else:
                compare_to_baseline(s, base, resamples)
    outputs = check_digests(records)
    design = "switched" if is_switched else "separate"
    verdict = "; ".join([*(s.verdict for s in summary if s.verdict),
                         design_line(design, order, every, discard)])
    missing = not_reached(records)
    if missing:
        verdict = f"{missing[0]}; {verdict}"
    if outputs.identical is False:
        verdict = f"OUTPUTS DIFFER: {outputs.mismatches[0].line()}; {verdict}"
    return AbResult(policies=list(policies), rounds=rounds, order=order, seed=seed,
                    runs=records, summary=summary, outputs=outputs, verdict=verdict,
                    clock=_clock(records), skip=skip, steps=steps, command=list(command),
                    interrupted=interrupted, warnings=_warnings(records, summary),
                    resamples=resamples, design=design, switch_every=every,
                    discard_after_switch=discard if is_switched else None,
                    position_effect=None if is_switched else position_effect(records,
                                                                             policies),
                    after_switch=switched.after_switch(records, discard) if is_switched
                    else None, not_reached=missing, stopped=stopped)
