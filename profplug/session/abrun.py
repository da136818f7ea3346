"""``profplug ab``'s launcher: run the job rounds x policies times, unprofiled, interleaved.

Every run is a ``profplug run --trace none`` (``session/launch.py``: the same start-up
hook, patches, steps, signal forwarding, status files and ``run.json``) with the sync
policy of the run, step timing (``PROFPLUG_STEP_TIMING=events``) and output digests
(``PROFPLUG_DIGEST=1``) on, in ``DIR/runs/<k>-<policy>-r<round>``. The job also gets
``PROFPLUG_AB_RUN`` (k), ``PROFPLUG_AB_ROUND`` and ``PROFPLUG_AB_POLICY``. A failed run
is recorded and the rest go on; SIGINT/SIGTERM stops after the current run. Then
``analyzers.ab.command.finish_ab`` writes ``DIR/ab.json`` and prints the table (stdlib
here; the statistics are the analyzer's).
"""

from __future__ import annotations

import json
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profplug.config import SYNC_POLICIES
from profplug.errors import ProfplugError
from profplug.session import outcome
from profplug.session.launch import RunOptions, clear_outputs, prepare_out
from profplug.session.launch import run as launch_run

OUTPUTS = ("runs", "ab.json")
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)


@dataclass
class AbOptions:
    """Everything ``profplug ab`` was asked to do."""

    out: Path
    command: list[str]
    policies: str = "device,event"
    rounds: int = 5
    skip: int = 20
    steps: int = 100
    order: str = "interleaved"
    seed: int | None = None
    patches: str = "megatron"  # not synchronize: its ranges only matter to a profiler
    step_fns: list[str] = field(default_factory=list)
    html: Path | None = None
    whatif: str | None = None
    force: bool = False
    timing: str = "events"


def _prepare(out: Path, force: bool) -> None:
    if out.is_dir() and any(out.iterdir()) and force:
        clear_outputs(out, OUTPUTS)
        if not any(out.iterdir()):
            force = False
    prepare_out(out, force)


def collect(run_dir: Path, index: int, rnd: int, policy: str, rc: int,
            wall_s: float) -> dict[str, Any]:
    """A run record of ``ab.json`` from the run's ``run.json`` (docs/ab.md)."""
    try:
        info = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError) as exc:
        info = {"ranks": [], "read_error": str(exc)}
    ranks, reasons = [], outcome.failure_lines(info.get("ranks", []))
    for r in info.get("ranks", []):
        timing = r.get("timing") or {}
        dig = r.get("digest") or {}
        window = r.get("window") or {}
        ranks.append({
            "rank": r.get("rank"), "status": r.get("status"), "clock": timing.get("clock"),
            "first_step": window.get("first_step"), "step_source": window.get("step_source"),
            "requested_steps": timing.get("requested_steps"),
            "step_us": timing.get("step_us") or [], "host_step_us": timing.get("host_step_us") or [],
            "timing_error": timing.get("error"),
            "digest": dig.get("digest"), "step_digests": dig.get("steps") or [],
            "digest_calls": dig.get("calls", 0), "digest_in_window": dig.get("in_window", 0),
        })
        if r.get("status") == "finished" and not timing.get("steps"):
            reasons.append(f"rank {r.get('rank')}: no timed step (fewer than --skip steps, or "
                           "no steps: profplug.step(), Megatron-Core's run_one_forward_step "
                           "or --step-fn)")
    if "read_error" in info:
        reasons.append(f"no run.json: {info['read_error']}")
    elif not ranks:
        reasons.append("no rank reported (did the job import torch?)")
    if rc and not reasons:
        reasons.append(f"exit status {rc}")
    return {"index": index, "round": rnd, "policy": policy,
            "status": "ok" if not reasons and rc == 0 else "failed", "exit_status": rc,
            "reasons": reasons, "dir": str(run_dir), "wall_s": round(wall_s, 3),
            "ranks": sorted(ranks, key=lambda k: k["rank"] if k["rank"] is not None else -1)}


def _check(opts: AbOptions) -> list[str]:
    from profplug.analyzers.ab.plan import ORDERS, parse_policies

    if not opts.command:
        raise ProfplugError("no command given: profplug ab -o DIR -- CMD ...")
    try:
        policies = parse_policies(opts.policies, SYNC_POLICIES)
    except ValueError as exc:
        raise ProfplugError(f"--policies: {exc}") from None
    if opts.rounds < 1:
        raise ProfplugError("--rounds must be >= 1")
    if opts.rounds < 3:
        print(f"profplug ab: note: {opts.rounds} round{'s' if opts.rounds > 1 else ''} give "
              "no confidence interval and no verdict (at least 3)", file=sys.stderr)
    if opts.order not in ORDERS:
        raise ProfplugError(f"--order must be one of {', '.join(ORDERS)}")
    if opts.whatif is not None:
        from profplug.analyzers.commands import run_paths

        run_paths(opts.whatif)  # fail now, not after the rounds
    return policies


class _Stop(Exception):
    """SIGINT/SIGTERM between two runs (during a run, the launcher forwards it to the job)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _stop(signum: int, frame: Any) -> None:
    raise _Stop(128 + signum)


def _run_all(opts: AbOptions, plan: list[tuple[int, str]]
             ) -> tuple[list[dict[str, Any]], int | None]:
    """Launch every run of ``plan`` in order; stop early on SIGINT/SIGTERM (the status)."""
    from profplug.analyzers.ab.analyze import with_medians

    runs: list[dict[str, Any]] = []
    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for k, (rnd, policy) in enumerate(plan):
            run_dir = opts.out / "runs" / f"{k:02d}-{policy}-r{rnd}"
            print(f"profplug ab: run {k + 1}/{len(plan)}: round {rnd}, {policy}",
                  file=sys.stderr)
            t0 = time.monotonic()
            rc = launch_run(RunOptions(
                out=run_dir, command=list(opts.command), trace="none", sync=policy,
                patches=opts.patches, step_fns=list(opts.step_fns), skip=opts.skip,
                steps=opts.steps, report=False, step_timing=opts.timing, digest=True,
                extra_env={"PROFPLUG_AB_RUN": str(k), "PROFPLUG_AB_ROUND": str(rnd),
                           "PROFPLUG_AB_POLICY": policy}))
            record = collect(run_dir, k, rnd, policy, rc, time.monotonic() - t0)
            runs.append(record)
            med = with_medians(record)["median_step_us"]
            print(f"profplug ab: run {k + 1}/{len(plan)}: {record['status']}"
                  + (f", median {med:,.1f} us/step" if med is not None else ""),
                  file=sys.stderr)
            if rc in INTERRUPTED:
                return runs, rc
    except _Stop as stop:
        return runs, stop.status
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return runs, None


def run_ab(opts: AbOptions) -> int:
    """Run the A/B; returns the exit status (docs/ab.md)."""
    from profplug.analyzers.ab.command import finish_ab
    from profplug.analyzers.ab.plan import schedule

    policies = _check(opts)
    seed = None
    if opts.order == "random":  # recorded in ab.json: the order can be replayed
        seed = opts.seed if opts.seed is not None else secrets.randbelow(2**31)
    plan = schedule(policies, opts.rounds, opts.order, seed)
    RunOptions(out=opts.out, command=opts.command, trace="none", patches=opts.patches,
               step_fns=opts.step_fns, skip=opts.skip, steps=opts.steps).config()  # checks
    _prepare(opts.out, opts.force)
    runs, interrupted = _run_all(opts, plan)
    if interrupted is not None:
        print(f"profplug ab: interrupted after {len(runs)} of {len(plan)} runs",
              file=sys.stderr)
    _, code = finish_ab(opts.out, runs, policies=policies, rounds=opts.rounds,
                        order=opts.order, seed=seed, skip=opts.skip, steps=opts.steps,
                        command=opts.command, interrupted=interrupted, html=opts.html,
                        whatif=opts.whatif)
    return code
