"""The observer effect of a profiled run: its traced steps against its untraced ones.

``profplug run`` times the steps of each rank's window (traced) and the steps before it, after
a warm-up, and after it (untraced) with one step timer (``profplug/session/steptimer.py``: CUDA
events on a GPU job, host wall time on a CPU one); the status files hold the step times
(``timing``, ``untraced``). This module turns them into run.json's ``observer`` object
(:func:`observer_from_ranks`, plain data) and the line the report prints. Per rank the figure
is :func:`stats.center` (the median over the non-outlier steps) of each series; the run's
is the slowest rank's (the pipeline's step), as ``profplug ab`` takes it. Above
:data:`OVERHEAD_WARN_PCT` the per-step figures of the report describe a slower job than the
real one: a warning says so.

Which untraced steps: those before the window when there are at least
:data:`MIN_BEFORE_STEPS` of them, else those after it. The steps right after the window are
not a clean baseline: the profiler exports its trace inside the job's process then (Kineto
writes and compresses the JSON), and those steps can be slower than the traced ones
(``benchmarks/2026-12-03/README.md``). Both medians stay in the
JSON (``untraced_before_us``, ``untraced_after_us``; ``untraced_from`` says which one is the
figure).
"""

from __future__ import annotations

import math
from typing import Any

from profplug.analyzers.steps.stats import STATISTIC, center

MIN_STEP_US, MAX_STEP_US = 1e-3, 8.64e10  # a recorded step: from 1 ns to 1 day
MAX_INT = 2**63  # run.json's integers (ranks, pids, counts) fit in 64 bits
OVERHEAD_WARN_PCT = 20.0  # traced steps this much slower than untraced ones: a warning
MIN_BEFORE_STEPS = 5  # untraced steps before the window that make the baseline alone


IGNORED_KEY = "ignored_values"  # run.json's values dropped_bad_numbers set to None, said


def _bad(v: Any, at: str, step: bool) -> str | None:
    """What is wrong with one scalar of run.json (None: nothing)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, int) and not -MAX_INT <= v <= MAX_INT:
        return f"{at}: a {len(str(abs(v))) if abs(v) < 10**4000 else 'many'}-digit integer " \
               "(beyond 64 bits)"
    if isinstance(v, float) and not math.isfinite(v):
        return f"{at}: {v} (not a finite number)"
    if step and not MIN_STEP_US <= v <= MAX_STEP_US:
        return (f"{at}: {v:g} us is not a step time (from {MIN_STEP_US:g} us, 1 ns, to "
                f"{MAX_STEP_US:g} us, 1 day)")
    return None


def drop_bad_numbers(meta: Any) -> list[str]:
    """Set each number of run.json the report cannot use to None, in place, and say where
    and what each was: each number finite and each integer within 64 bits (a 401-digit
    ``step_us`` made float() overflow), each step time (``ranks[].timing.step_us``,
    ``ranks[].untraced.before/after.step_us``, ``observer.traced_us/untraced_us``) from 1 ns
    to 1 day. The value alone is lost, not the run.json. Iterative (the depth is bounded by
    the caller)."""
    out: list[str] = []
    todo: list[tuple[Any, str, bool]] = [(meta, "", False)]
    while todo:
        v, at, step = todo.pop()
        if isinstance(v, dict):
            items: list[tuple[Any, Any, str, bool]] = [
                (k, x, f"{at}.{k}" if at else str(k), k == "step_us" or (
                    at == "observer" and k in ("traced_us", "untraced_us")))
                for k, x in v.items()]
        elif isinstance(v, list):
            items = [(i, x, f"{at}[{i}]", step) for i, x in enumerate(v)]
        else:
            continue
        for k, x, where, is_step in items:
            why = _bad(x, where, is_step)
            if why is not None:
                v[k] = None
                out.append(why)
            else:
                todo.append((x, where, is_step))
    return sorted(out)


def _series(timing: Any) -> list[float]:
    if not isinstance(timing, dict):
        return []
    return [float(x) for x in timing.get("step_us") or [] if isinstance(x, (int, float))]


def _untraced(r: dict[str, Any]) -> tuple[dict[str, Any], list[float], list[float]]:
    """One rank record's ``untraced`` object and its step series before and after the
    window, us."""
    untraced_rec = r.get("untraced")
    untraced_rec = untraced_rec if isinstance(untraced_rec, dict) else {}
    return (untraced_rec, _series(untraced_rec.get("before")),
            _series(untraced_rec.get("after")))


def _baseline(before: list[float], after: list[float]) -> tuple[list[float], str]:
    """The untraced steps that are a rank's baseline (the module docstring) and where they
    come from ("before" | "after")."""
    if len(before) >= MIN_BEFORE_STEPS or (before and not after):
        return before, "before"
    return after, "after"


def rank_series(r: dict[str, Any]) -> tuple[list[float], list[float], str]:
    """One rank record's traced steps, its baseline steps and where those come from
    ("before" | "after"), us."""
    _, before, after = _untraced(r)
    return (_series(r.get("timing")), *_baseline(before, after))


def _rank(r: dict[str, Any]) -> dict[str, Any] | None:
    untraced_rec, before, after = _untraced(r)
    traced = _series(r.get("timing"))
    use, source = _baseline(before, after)
    if not traced or not use:
        return None
    clocks = {t.get("clock") for t in (r.get("timing"), untraced_rec.get("before"),
                                       untraced_rec.get("after")) if isinstance(t, dict)}
    return {"rank": r.get("rank"), "traced_us": round(center(traced), 3),
            "untraced_us": round(center(use), 3), "untraced_from": source,
            "untraced_before_us": round(center(before), 3) if before else None,
            "untraced_after_us": round(center(after), 3) if after else None,
            "traced_steps": len(traced),
            "untraced_steps_before": len(before), "untraced_steps_after": len(after),
            "clock": "/".join(sorted(c for c in clocks if c))}


def observer_from_ranks(ranks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """run.json's ``observer`` from the rank records (None: no rank has both series)."""
    per = [x for r in ranks if (x := _rank(r)) is not None]
    if not per:
        return None
    slowest = max(per, key=lambda x: x["traced_us"])
    traced = slowest["traced_us"]
    baseline = max(per, key=lambda x: x["untraced_us"])
    untraced = baseline["untraced_us"]
    pct = round(100.0 * (traced - untraced) / untraced, 1) if untraced > 0 else None
    obs: dict[str, Any] = {
        "statistic": STATISTIC, "traced_us": traced, "untraced_us": untraced,
        "overhead_pct": pct, "rank": slowest["rank"], "clock": slowest["clock"],
        "untraced_from": baseline["untraced_from"], "ranks": per,
    }
    obs["line"] = observer_line(obs)
    obs["warning"] = observer_warning(obs)
    return obs


def observer_line(obs: dict[str, Any]) -> str:
    """The traced and untraced medians (us) and their difference; an untraced median taken
    after the window says so (the profiler's export ran during those steps)."""
    pct = obs.get("overhead_pct")
    z = f" ({pct:+.1f}%)" if isinstance(pct, (int, float)) else ""
    after = " (after the window)" if obs.get("untraced_from") == "after" else ""
    return (f"traced steps: median {obs['traced_us']:,.1f} us; untraced{after}: "
            f"{obs['untraced_us']:,.1f} us{z}")


def observer_warning(obs: dict[str, Any]) -> str | None:
    pct = obs.get("overhead_pct")
    if not isinstance(pct, (int, float)) or pct <= OVERHEAD_WARN_PCT:
        return None
    return (f"the traced steps are {pct:.0f}% slower than the untraced ones (over "
            f"{OVERHEAD_WARN_PCT:.0f}%): the per-step figures describe a slower job than the "
            "real one")


def from_meta(meta: dict[str, Any]) -> dict[str, Any] | None:
    """run.json's ``observer`` object, when it has the two medians: made again from the
    ranks' step series when run.json has them (so an older run.json reads with today's
    rule), else as stored."""
    ranks = meta.get("ranks")
    if isinstance(ranks, list):
        again = observer_from_ranks([r for r in ranks if isinstance(r, dict)])
        if again is not None:
            return again
    obs = meta.get("observer")
    if not isinstance(obs, dict):
        return None
    ok = all(isinstance(obs.get(k), (int, float)) for k in ("traced_us", "untraced_us"))
    return obs if ok else None


def untraced_step_us(meta: dict[str, Any]) -> float | None:
    """The untraced median step of the run (``whatif --unprofiled auto``), if recorded."""
    obs = from_meta(meta)
    return float(obs["untraced_us"]) if obs is not None and obs["untraced_us"] > 0 else None


def no_window(meta: dict[str, Any]) -> str | None:
    """Why ``profplug run``'s window never opened (run.json's ``no_window``), as a sentence."""
    why = meta.get("no_window")
    if not isinstance(why, str) or not why:
        return None
    return why[0].upper() + why[1:] + "."


def meta_line(meta: dict[str, Any]) -> str | None:
    """"traced steps: median X us; untraced: Y us (+Z%)", when run.json has both."""
    obs = from_meta(meta)
    return None if obs is None else "observer effect: " + observer_line(obs)


def meta_warnings(meta: dict[str, Any]) -> list[str]:
    """The observer's warnings, after one line per run.json value ignored (``IGNORED_KEY``)."""
    ignored = meta.get(IGNORED_KEY) if isinstance(meta, dict) else None
    head = [f"run.json: {w}: ignored" for w in ignored[:5]] if isinstance(ignored, list) else []
    return head + _observer_warnings(meta)


def _observer_warnings(meta: dict[str, Any]) -> list[str]:
    """The report's run warnings from run.json (the observer effect over the threshold)."""
    out = []
    obs = from_meta(meta)
    if obs is not None:
        warning = observer_warning(obs)
        if warning:
            out.append(warning)
    return out
