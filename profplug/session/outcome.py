"""After the job: settle each rank's status, say which ranks failed and why, and warn about
``--step-fn`` names that never became a step (stdlib only; used by ``profplug run``)."""

from __future__ import annotations

import signal
from typing import Any

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


def step_fn_warnings(requested: list[str], ranks: list[dict[str, Any]]) -> list[str]:
    """A warning per requested ``MODULE:QUALNAME`` that no rank ever called."""
    warnings = []
    for name in requested:
        seen = [t for r in ranks for t in (r.get("step_fns") or []) if t.get("name") == name]
        calls = sum(int(t.get("calls") or 0) for t in seen)
        if calls:
            continue
        errors = sorted({t["error"] for t in seen if t.get("error")})
        module = name.partition(":")[0]
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
