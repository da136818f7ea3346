"""``profplug ab``'s launcher: run the job, unprofiled, switched or in separate runs.

Every run is a ``profplug run --trace none`` (``session/launch.py``: the same start-up
hook, patches, steps, signal forwarding, status files and ``run.json``) with step timing
(``PROFPLUG_STEP_TIMING=events``) and output digests (``PROFPLUG_DIGEST=1``) on.

- Switched (``--switch-every N``, the default with N = 10): ``--rounds`` runs, each
  alternating the policies in blocks of N steps (``PROFPLUG_SWITCH_EVERY``,
  ``PROFPLUG_SWITCH_ORDER``: ``profplug.session.switcher``), block order rotated from run to
  run; in ``DIR/runs/<k>-switched-r<k>``. If the first run shows that the job follows only
  the policy it starts with (some policies reached it, others not), the rest are separate
  runs (said so).
- Separate (``--switch-every 0``): rounds x policies runs, one sync policy each, in
  ``DIR/runs/<k>-<label>-r<round>``, in the ``--order`` (counterbalanced by default).

The job also gets ``PROFPLUG_AB_RUN`` (k), ``PROFPLUG_AB_ROUND``, ``PROFPLUG_AB_POLICY``
(the label; switched: the block order) and ``PROFPLUG_AB_POSITION`` (the run's place in its
round). A failed run is recorded and the rest go on, unless every run of the first round
failed the same way (a usage error, a missing script) or reached no policy: then ab stops
and says why. SIGINT/SIGTERM stops after the current run. Then
``analyzers.commands.ab_report.finish_ab`` writes ``DIR/ab.json`` and prints the table (stdlib
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

from profplug.analyzers.core.atomicfile import replace_text
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.vocabulary import StepTiming, TraceKind
from profplug.config import ENV_SWITCH_EVERY, ENV_SWITCH_ORDER, SYNC_POLICIES
from profplug.session import outcome
from profplug.session.launch import RunOptions, clear_outputs, prepare_out
from profplug.session.launch import run as launch_run

OUTPUTS = ("runs", "ab.json", "probe_run.json")
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)
DEFAULT_SWITCH_EVERY = 10


@dataclass
class AbOptions:
    """Everything ``profplug ab`` was asked to do."""

    out: Path
    command: list[str]
    policies: str = "device,event"
    rounds: int = 5
    skip: int = 20
    steps: int = 100
    order: str = "counterbalanced"
    switch_every: int | None = None  # None: switched every DEFAULT_SWITCH_EVERY (auto)
    aa: bool = False  # --aa: --policies device,device
    seed: int | None = None
    patches: str = "megatron,transformers"  # not synchronize: its ranges matter to a profiler
    step_fns: list[str] = field(default_factory=list)
    sync_sites: list[str] = field(default_factory=list)
    html: Path | None = None
    whatif: str | None = None
    force: bool = False
    timing: StepTiming = StepTiming.EVENTS


def _prepare(out: Path, force: bool) -> None:
    if out.is_dir() and any(out.iterdir()) and force:
        clear_outputs(out, OUTPUTS)
        if not any(out.iterdir()):
            force = False
    prepare_out(out, force)


@dataclass
class Planned:
    """One run to launch: its round, label (switched: ``a+b``), position, block order."""

    round: int
    label: str
    position: int = 0
    block_order: list[str] | None = None
    every: int = 0


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
            "policy_counts": (r.get("policy") or {}).get("counts"),
            "switches": (r.get("policy") or {}).get("switches") or [],
        })
        if r.get("status") == "finished" and not timing.get("steps"):
            reasons.append(f"rank {r.get('rank')}: no timed step (fewer than --skip steps, or "
                           "no steps: profplug.step(), Megatron-Core's run_one_forward_step, "
                           "transformers' pipeline_parallel_naive_forward or --step-fn)")
    if "read_error" in info:
        reasons.append(f"no run.json: {info['read_error']}")
    elif not ranks and rc:
        reasons.append(f"exit status {rc} before any rank reported (the command failed "
                       "before the job imported torch: a usage error, a missing script?)")
    elif not ranks:
        reasons.append("no rank reported (did the job import torch?)")
    if rc and not reasons:
        reasons.append(f"exit status {rc}")
    # a signal that reached the launcher stops ab, whatever status the job then exited with
    # (torchrun turns a forwarded SIGTERM into its own exit status 1)
    got = [getattr(signal.Signals, n, None) for n in info.get("signals") or []]
    sig = next((int(g) for g in reversed(got) if g in (signal.SIGINT, signal.SIGTERM)), None)
    if sig is not None and rc not in INTERRUPTED:
        reasons.append(f"interrupted ({signal.Signals(sig).name}; the job exited {rc})")
        rc = 128 + sig
    return {"index": index, "round": rnd, "policy": policy,
            "status": "ok" if not reasons and rc == 0 else "failed", "exit_status": rc,
            "reasons": reasons, "dir": str(run_dir), "wall_s": round(wall_s, 3),
            "ranks": sorted(ranks, key=lambda k: k["rank"] if k["rank"] is not None else -1)}


def _check(opts: AbOptions) -> list[str]:
    from profplug.analyzers.ab.plan import ORDERS, parse_policies
    from profplug.analyzers.ab.switched import DISCARD_AFTER_SWITCH

    if not opts.command:
        raise ProfplugError("no command given: profplug ab -o DIR -- CMD ...")
    if opts.switch_every is not None and (opts.switch_every < 0 or 0 < opts.switch_every
                                          <= DISCARD_AFTER_SWITCH):
        raise ProfplugError(f"--switch-every must be 0 (separate runs) or more than "
                            f"{DISCARD_AFTER_SWITCH} (the first {DISCARD_AFTER_SWITCH} steps "
                            "of every block are left out)")
    try:
        policies = parse_policies("device,device" if opts.aa else opts.policies,
                                  SYNC_POLICIES)
    except ValueError as exc:
        raise ProfplugError(f"--policies: {exc}") from None
    if opts.rounds < 1:
        raise ProfplugError("--rounds must be >= 1")
    if opts.rounds < 3:
        print(f"profplug ab: note: {opts.rounds} round{'s' if opts.rounds > 1 else ''} give "
              "no confidence interval and no verdict (at least 3)", file=sys.stderr)
    if opts.order not in ORDERS:
        raise ProfplugError(f"--order must be one of {', '.join(ORDERS)}")
    if opts.switch_every and opts.steps < 2 * opts.switch_every:
        raise ProfplugError(f"--switch-every {opts.switch_every} needs --steps >= "
                            f"{2 * opts.switch_every} (a block of every policy in the window)")
    if opts.whatif is not None:
        from profplug.analyzers.scale.pathargs import run_paths

        run_paths(opts.whatif)  # fail now, not after the rounds
    return policies


class _Stop(Exception):
    """SIGINT/SIGTERM between two runs (during a run, the launcher forwards it to the job)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _stop(signum: int, frame: Any) -> None:
    raise _Stop(128 + signum)


def _launch(opts: AbOptions, k: int, p: Planned) -> dict[str, Any]:
    from profplug.analyzers.ab.plan import policy_of

    order = p.block_order or [p.label]
    name = "switched" if p.block_order else p.label
    run_dir = opts.out / "runs" / f"{k:02d}-{name}-r{p.round}"
    env = {"PROFPLUG_AB_RUN": str(k), "PROFPLUG_AB_ROUND": str(p.round),
           "PROFPLUG_AB_POLICY": ",".join(order), "PROFPLUG_AB_POSITION": str(p.position)}
    if p.block_order:
        env |= {ENV_SWITCH_EVERY: str(p.every), ENV_SWITCH_ORDER: ",".join(p.block_order)}
    t0 = time.monotonic()
    rc = launch_run(RunOptions(
        out=run_dir, command=list(opts.command), trace=TraceKind.NONE, sync=policy_of(order[0]),
        patches=opts.patches, step_fns=list(opts.step_fns),
        sync_sites=list(opts.sync_sites), skip=opts.skip,
        steps=opts.steps, report=False, step_timing=opts.timing, digest=True,
        extra_env=env))
    record = collect(run_dir, k, p.round, p.label, rc, time.monotonic() - t0)
    record["position"] = p.position
    if p.block_order:
        record |= {"block_order": list(p.block_order), "switch_every": p.every}
    return record


def same_failure(first: list[dict[str, Any]]) -> str | None:
    """Why to stop after the first round: every run of it failed the same way, or no run
    of it reached its policy (None: go on)."""
    from profplug.analyzers.ab.policy_reach import LOOKED_FOR, reached

    if len(first) < 2:
        return None
    keys = {(r["exit_status"], tuple(r["reasons"])) for r in first}
    if all(r["status"] != "ok" for r in first) and len(keys) == 1:
        status, reasons = keys.pop()
        why = "; ".join(reasons) or f"exit status {status}"
        return f"every run of the first round failed the same way ({why})"
    got = [reached(r) for r in first]
    if all(r["status"] == "ok" for r in first) and all(g is not None and not any(g.values())
                                                       for g in got):
        return f"no policy reached the job in the first round: {LOOKED_FOR}"
    return None


def _run_all(opts: AbOptions, plan: list[Planned], labels: list[str]
             ) -> tuple[list[dict[str, Any]], int | None, str | None, dict[str, Any] | None]:
    """Launch every run of ``plan`` in order; stop early on SIGINT/SIGTERM (the status),
    or after the first round when it cannot succeed (why). Returns the runs, the
    interruption, why ab stopped, and the probe run when switching fell back to separate
    runs."""
    from profplug.analyzers.ab.analyze import with_medians
    from profplug.analyzers.ab.policy_reach import reached_some_not_all

    runs: list[dict[str, Any]] = []
    probe = None
    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        k = 0
        while k < len(plan):
            p = plan[k]
            what = (f"blocks {'/'.join(p.block_order)} of {p.every} steps" if p.block_order
                    else p.label)
            print(f"profplug ab: run {k + 1}/{len(plan)}: round {p.round}, {what}",
                  file=sys.stderr)
            record = _launch(opts, k, p)
            runs.append(record)
            med = with_medians(record)["median_step_us"]
            print(f"profplug ab: run {k + 1}/{len(plan)}: {record['status']}"
                  + (f", median {med:,.1f} us/step" if med is not None else ""),
                  file=sys.stderr)
            if record["exit_status"] in INTERRUPTED:
                return runs, record["exit_status"], None, probe
            if (k == 0 and p.block_order and opts.switch_every is None
                    and record["status"] == "ok" and reached_some_not_all(record)):
                print("profplug ab: the job follows only the policy it starts with (run 1 "
                      "reached only some policies): switching inside a run cannot work; "
                      "separate runs, counterbalanced order", file=sys.stderr)
                probe, runs, k = record, [], 0
                plan[:] = separate_plan(labels, opts.rounds, "counterbalanced", None)
                opts.order = "counterbalanced"
                continue
            k += 1
            if k == len(labels) and k < len(plan):
                why = same_failure(runs)
                if why:
                    print(f"profplug ab: {why}: not running the other {len(plan) - k} "
                          "runs", file=sys.stderr)
                    return runs, None, why, probe
    except _Stop as stop:
        return runs, stop.status, None, probe
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return runs, None, None, probe


def separate_plan(labels: list[str], rounds: int, order: str, seed: int | None
                  ) -> list[Planned]:
    from profplug.analyzers.ab.plan import positions, schedule

    plan = schedule(labels, rounds, order, seed)
    return [Planned(rnd, lb, pos) for (rnd, lb), pos in zip(plan, positions(plan),
                                                             strict=True)]


def switched_plan(labels: list[str], runs: int, every: int) -> list[Planned]:
    from profplug.analyzers.ab.plan import switched_orders

    return [Planned(r, "+".join(o), 0, o, every)
            for r, o in enumerate(switched_orders(labels, runs))]


def run_ab(opts: AbOptions) -> int:
    """Run the A/B; returns the exit status (docs/ab.md)."""
    from profplug.analyzers.commands.ab_report import finish_ab

    policies = _check(opts)
    seed = None
    if opts.order == "random":  # recorded in ab.json: the order can be replayed
        seed = opts.seed if opts.seed is not None else secrets.randbelow(2**31)
    every = DEFAULT_SWITCH_EVERY if opts.switch_every is None else opts.switch_every
    if opts.switch_every is None and opts.steps < 2 * len(policies) * every:
        print(f"profplug ab: note: {opts.steps} timed steps are too few to switch policies "
              f"every {every} steps (at least {2 * len(policies) * every}): separate runs",
              file=sys.stderr)
        every = 0
    plan = (switched_plan(policies, opts.rounds, every) if every
            else separate_plan(policies, opts.rounds, opts.order, seed))
    RunOptions(out=opts.out, command=opts.command, trace=TraceKind.NONE, patches=opts.patches,
               step_fns=opts.step_fns, sync_sites=opts.sync_sites, skip=opts.skip,
               steps=opts.steps).config()  # checks
    _prepare(opts.out, opts.force)
    runs, interrupted, stopped, probe = _run_all(opts, plan, policies)
    if interrupted is not None:
        print(f"profplug ab: interrupted after {len(runs)} of {len(plan)} runs",
              file=sys.stderr)
    if probe is not None:
        replace_text(opts.out / "probe_run.json", json.dumps(probe, indent=1))
    _, code = finish_ab(opts.out, runs, policies=policies, rounds=opts.rounds,
                        order=opts.order, seed=seed, skip=opts.skip, steps=opts.steps,
                        command=opts.command, interrupted=interrupted, html=opts.html,
                        whatif=opts.whatif, stopped=stopped)
    return code
