"""After the job: settle each rank's status, say which ranks failed and why, warn about
``--step-fn`` names that never became a step, and say how to look at an Nsight capture
(stdlib only; used by ``profplug run``)."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path
from typing import Any

from profplug.analyzers.core.vocabulary import TraceKind, WindowMode

LOST_REASON = "no final status: killed before it could write one (SIGKILL, OOM killer?)"


def settle(ranks: list[dict[str, Any]], job_pid: int | None, exit_status: int | None) -> None:
    """Fix up rank records in place once the job has ended.

    - "running" (the start-up record, never replaced): the rank was killed outright -> "lost".
    - "finished" but the rank *is* the launched process and it exited non-zero (a
      ``raise SystemExit(n)`` that profplug cannot see from inside) -> "exit" with that code.
    """
    for r in ranks:
        if r.get("status") == "running":
            r["status"], r["reason"] = "lost", LOST_REASON
        elif (r.get("status") == "finished" and job_pid is not None and r.get("pid") == job_pid
              and exit_status and 0 < exit_status < 128):
            r["status"], r["exit_code"] = "exit", exit_status
            r["reason"] = "exit status of the process (SystemExit)"


def _signal_name(signum: Any) -> str:
    try:
        return signal.Signals(int(signum)).name
    except (TypeError, ValueError):
        return str(signum)


def failure_line(r: dict[str, Any]) -> str | None:
    """One line for a rank that did not finish cleanly, else None."""
    status = r.get("status")
    if status == "finished":
        return None
    who = f"rank {r['rank']}" if "rank" in r else str(r.get("file", "rank ?"))
    if status == "exception":
        why = str(r.get("exception"))
    elif status == "exit":
        why = f"exit code {r.get('exit_code')}"
    elif status == "signal":
        why = f"{_signal_name(r.get('signal'))}"
    elif status == "unreadable":
        why = str(r.get("error"))
    else:
        why = str(r.get("reason"))
    return f"{who}: {status}: {why}"


def failure_lines(ranks: list[dict[str, Any]]) -> list[str]:
    return [line for r in ranks if (line := failure_line(r)) is not None]


def step_fn_summary(requested: list[str], ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per requested ``--step-fn``: whether it was patched (and on which ranks), the calls
    it saw over all ranks, where it was found, and why it gave no step (None when it did)."""
    out = []
    for name in requested:
        lines = step_fn_warnings([name], ranks)
        why_not = (lines[0].removeprefix(f"--step-fn {name}: ").removesuffix(
            "; no steps came from it") if lines else None)
        seen = [(r.get("rank"), t) for r in ranks for t in (r.get("step_fns") or [])
                if t.get("name") == name]
        out.append({
            "name": name,
            "patched": any(t.get("patched") for _, t in seen),
            "patched_ranks": sorted(rk for rk, t in seen if t.get("patched") and rk is not None),
            "calls": sum(int(t.get("calls") or 0) for _, t in seen),
            "where": next((t.get("where") for _, t in seen if t.get("where")), None),
            "why_not": why_not,
        })
    return out


def sync_site_warnings(ranks: list[dict[str, Any]]) -> list[str]:
    """A warning per sync site no rank called: a declared one (``--sync-site``) never
    called, or any whose function was not found (a library's moved functions)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in ranks:
        for t in r.get("sync_sites") or []:
            by_name.setdefault(str(t.get("name")), []).append(t)
    warnings = []
    for name, seen in by_name.items():
        if sum(int(t.get("calls") or 0) for t in seen):
            continue
        errors = sorted({t["error"] for t in seen if t.get("error")})
        if errors:
            why = errors[0]
        elif seen[0].get("origin") != "declared":
            continue  # a library's site in a job that does not use it
        elif any(t.get("patched") for t in seen):
            why = "never called"
        else:
            why = f"module {name.rpartition(':')[0]} was never imported"
        warnings.append(f"--sync-site {name}: {why}; no policy applied there")
    return warnings


def step_fn_warnings(requested: list[str], ranks: list[dict[str, Any]]) -> list[str]:
    """A warning per requested ``MODULE:QUALNAME`` that no rank ever called."""
    warnings = []
    for name in requested:
        seen = [t for r in ranks for t in (r.get("step_fns") or []) if t.get("name") == name]
        calls = sum(int(t.get("calls") or 0) for t in seen)
        if calls:
            continue
        errors = sorted({t["error"] for t in seen if t.get("error")})
        module = name.rpartition(":")[0]
        if errors:
            why = errors[0]
        elif any(t.get("patched") for t in seen):
            why = "never called"
        elif seen:
            why = f"module {module} was never imported"
        else:
            why = "no rank reported on it (did any rank import torch?)"
        warnings.append(f"--step-fn {name}: {why}; no steps came from it")
    return warnings


NO_WINDOW_EXIT = 7  # ``profplug run``'s status when the job exited 0 but nothing was profiled


def traces_written(out: Path, trace: TraceKind) -> bool:
    """Whether the run left a trace: a Kineto rank file, or nsys's report (or its export)."""
    if trace is TraceKind.KINETO:
        return any((out / "kineto").glob("rank*.json.gz"))
    if trace is TraceKind.NSYS:
        return any((out / "nsys" / f"report{ext}").is_file() for ext in (".nsys-rep", ".sqlite"))
    return True  # --trace none: no trace asked for


def startup_failures(out: Path) -> list[tuple[str, str]]:
    """(python, error) per process whose profplug start-up failed (``sitecustomize``)."""
    found = []
    for p in sorted((out / "status").glob("startup-*.txt")):
        try:
            python, _, error = p.read_text().partition("\n")
        except (OSError, UnicodeDecodeError):
            continue
        found.append((python.strip(), error.strip()))
    return found


def trace_problem(out: Path, trace: TraceKind, ranks: list[dict[str, Any]]) -> str | None:
    """Why no trace was written, in one line; None when one was (or none was asked for).
    No rank at all is nothing profiled too (nsys may leave an empty report)."""
    if traces_written(out, trace) and (ranks or trace is TraceKind.NONE):
        return None
    failed = startup_failures(out)
    if failed:
        python, error = failed[0]
        hint = " (is profplug installed for it?)" if "ModuleNotFound" in error else ""
        return (f"nothing was profiled: profplug's start-up failed in {python or 'the job'}"
                f"{hint}: {error}")
    if not ranks:
        return ("nothing was profiled: no trace was written: no process of the job imported "
                "torch (profplug's session starts at the job's import torch)")
    return "nothing was profiled: no trace was written by any rank"


def _step_fn_reasons(requested: list[str], ranks: list[dict[str, Any]]) -> list[str]:
    """``--step-fn X: never called`` (or its other reason) per requested name with no call."""
    return [w.removesuffix("; no steps came from it")
            for w in step_fn_warnings(requested, ranks)]


def window_problem(ranks: list[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """Why no rank opened the profiling window, in one line; None when one did (or when no
    rank reported at all: the job never imported torch, said elsewhere)."""
    records = [r for r in ranks if isinstance(r.get("window"), dict)]
    if not records:
        return None
    windows = [r["window"] for r in records]
    if any(w.get("mode") == WindowMode.RUN or w.get("first_step") is not None for w in windows):
        return None
    skip = int(options.get("skip", windows[0].get("skip") or 0))
    seen = max(int(w.get("steps_seen") or 0) for w in windows)
    if seen:
        sources = sorted({str(w.get("step_source")) for w in windows if w.get("step_source")})
        by = f" ({'/'.join(sources)} steps)" if sources else ""
        return (f"the window never opened: the job ran {seen} step{'s' * (seen != 1)}{by}; "
                f"the window starts at step {skip} (--skip {skip})")
    step_fns = list(options.get("step_fns") or [])
    fns = _step_fn_reasons(step_fns, ranks) if step_fns else ["no --step-fn given"]
    patches = str(options.get("patches", "megatron,transformers"))
    libs = [word for lib, word in (("megatron", "Megatron"), ("transformers", "transformers"))
            if lib in patches]
    meg = (f"no {'/'.join(libs)} step" if libs
           else "no library step (--patch without megatron, transformers)")
    return (f"the window never opened: no step: no profplug.step, {meg}, {'; '.join(fns)}; "
            "and no profplug p2p or synchronize call to record the whole run from")


def nsys_views(out: Path) -> list[str]:
    """After ``--trace nsys``: how to see every rank in one Nsight Systems window (the job ran
    under one ``nsys profile``: one report holds each rank's process, on one clock) and the
    annotated merged trace; [] when nsys wrote no report."""
    rep = out / "nsys" / "report.nsys-rep"
    if not rep.is_file():
        return []
    merged = out.parent / f"{out.name}-merged.json.gz"  # outside DIR: not read back as a trace
    return [f"every rank in one Nsight Systems window: nsys-ui {shlex.quote(str(rep))} (one "
            "report, a process per rank)",
            "the annotated view (idle by cause, waits across ranks, critical path, prediction):"
            f" profplug report {shlex.quote(str(out))} --trace-out {shlex.quote(str(merged))}"
            ", then open it in https://ui.perfetto.dev or chrome://tracing"]
