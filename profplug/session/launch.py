"""``profplug run``'s library side: prepare DIR, launch the job unchanged but for its
environment, wait, export, merge per-rank status into ``DIR/run.json`` (stdlib only).

Layout of DIR: ``kineto/rank{R}.json.gz`` (Kineto) or ``nsys/report.nsys-rep`` +
``nsys/report.sqlite`` (nsys), ``status/rank{R}.json`` (written by each rank), ``run.json``,
``report.html``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from profplug.analyzers.core.atomicfile import replace_text
from profplug.analyzers.core.errors import ProfplugError, ToolMissingError
from profplug.analyzers.core.version import __version__
from profplug.config import (
    ENV_OWNER_PID,
    SYNC_CHOICES,
    TRACES,
    Config,
    is_step_fn_path,
    parse_patches,
    parse_step_fns,
    parse_sync_sites,
)
from profplug.session import outcome, progress

SITECUSTOMIZE_DIR = Path(__file__).resolve().parent / "sitecustomize"
OUTPUTS = ("kineto", "status", "nsys", "run.json", "report.html")
_ENV_PREFIXES = ("PROFPLUG_", "NCCL_", "TORCH_", "PYTORCH_", "CUDA_", "OMP_", "MASTER_")
_ENV_NAMES = ("PYTHONPATH", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK",
              "NVIDIA_VISIBLE_DEVICES")
MIN_FREE_BYTES = 256 << 20  # refuse to start with less free space than this on DIR's disk
SIGINT_GRACE_S = 1.0  # a terminal's Ctrl-C reaches the job too; forward only if it did not


@dataclass
class RunOptions:
    """Everything ``profplug run`` was asked to do."""

    out: Path
    command: list[str]
    trace: str = "kineto"
    sync: str = "keep"
    patches: str = "megatron,transformers,synchronize"
    step_fns: list[str] = field(default_factory=list)
    sync_sites: list[str] = field(default_factory=list)
    skip: int = 10
    steps: int = 50
    cpu_ops: bool = False
    nsys: str | None = None
    report: bool = True
    force: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    step_timing: str = "off"  # off | host | events (profplug ab: events)
    digest: bool = False  # profplug.digest on (profplug ab)

    def config(self) -> Config:
        if self.trace not in TRACES:
            raise ProfplugError(f"--trace must be one of {', '.join(TRACES)}, got {self.trace!r}")
        if self.sync not in SYNC_CHOICES:
            raise ProfplugError(f"--sync must be one of {', '.join(SYNC_CHOICES)}")
        if self.skip < 0 or self.steps < 1:
            raise ProfplugError("--skip must be >= 0 and --steps >= 1")
        try:
            patches = parse_patches(self.patches)
        except ValueError as exc:
            raise ProfplugError(f"--patch: {exc}") from None
        try:
            step_fns = tuple(_absolute(s) for s in parse_step_fns(",".join(self.step_fns)))
        except ValueError as exc:
            raise ProfplugError(f"--step-fn: {exc}") from None
        try:
            sync_sites = parse_sync_sites(",".join(self.sync_sites))
        except ValueError as exc:
            raise ProfplugError(f"--sync-site: {exc}") from None
        return Config(out=str(self.out.resolve()), trace=self.trace, sync=self.sync,
                      patches=patches, step_fns=step_fns, sync_sites=sync_sites,
                      skip=self.skip, steps=self.steps,
                      cpu_ops=self.cpu_ops, step_timing=self.step_timing, digest=self.digest)


def _absolute(spec: str) -> str:
    """``path/job.py:f`` -> ``/abs/path/job.py:f`` (ranks may run elsewhere); names as given."""
    module, _, qualname = spec.rpartition(":")
    if not is_step_fn_path(module):
        return spec
    if "," in module:
        raise ValueError(f"{spec}: a path with a comma cannot be passed to the ranks")
    return f"{os.path.abspath(module)}:{qualname}"


def clear_outputs(out: Path, names: tuple[str, ...]) -> None:
    """Remove what a previous run wrote into ``out`` (only these names; nothing else)."""
    for name in names:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def prepare_out(out: Path, force: bool) -> None:
    """Create DIR; refuse a non-empty one unless ``force``; fail now if it is not writable."""
    if out.exists() and not out.is_dir():
        raise ProfplugError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ProfplugError(f"{out}: directory is not empty (use --force to overwrite)")
        clear_outputs(out, OUTPUTS)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".profplug-probe-{os.getpid()}"  # a probe, removed at once: no output
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ProfplugError(f"{out}: cannot write there ({exc.strerror or exc})") from None
    try:
        free = shutil.disk_usage(out).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise ProfplugError(f"{out}: only {free >> 20} MiB free on its file system "
                            f"(traces need room; at least {MIN_FREE_BYTES >> 20} MiB)")


def nsys_for_run(explicit: str | None) -> str:
    """The nsys executable (``--nsys PATH`` or PATH), or a clear ToolMissingError."""
    from profplug.analyzers.readers.nsys.source import find_nsys

    path = find_nsys(explicit or "nsys")  # "nsys": PATH, not $PROFPLUG_NSYS
    if path is None and explicit:
        raise ToolMissingError(f"--nsys {explicit}: not an executable file")
    if path is None:
        raise ToolMissingError(
            "nsys (Nsight Systems) not found on PATH: install it or pass --nsys PATH, "
            "or use --trace kineto"
        )
    return path


def child_env(config: Config, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The job's environment: ours + the profplug contract + sitecustomize on PYTHONPATH."""
    env = dict(os.environ)
    env.pop(ENV_OWNER_PID, None)
    env.update(config.to_env())
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(SITECUSTOMIZE_DIR) + (os.pathsep + old if old else "")
    env.update(extra or {})
    return env


def nsys_command(nsys: str, out: Path, command: list[str]) -> list[str]:
    """``nsys profile`` around the job. ``--kill none``: when the capture range ends
    (``--capture-range-end=stop``), nsys would otherwise SIGTERM the job."""
    return [
        nsys, "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw", "none",
        "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--kill", "none",
        "-o", str(out / "nsys" / "report"), "--force-overwrite", "true", *command,
    ]


@dataclass(frozen=True)
class JobEnd:
    """How a launched job ended: its exit status (``128 + N`` when signal N ended it, and
    ``128 + SIGINT`` when interrupted even if it then exited cleanly), its process id, and
    the signals profplug received while it ran."""

    status: int
    pid: int
    signals: tuple[int, ...]


def _run_forwarding_signals(cmd: list[str], env: dict[str, str], quiet: bool = False
                            ) -> JobEnd:
    """Run ``cmd`` as an argument list (never a shell; output streams through).

    SIGTERM is forwarded at once. SIGINT is forwarded only if the job is still running
    SIGINT_GRACE_S later (a terminal's Ctrl-C already reached the whole process group; a
    ``kill -INT`` aimed at profplug did not), or at once on a second SIGINT. ``quiet``:
    progress bars filtered out of the output that does not go to a terminal
    (``session.progress``).
    """
    out, err = progress.quiet_streams() if quiet else (False, False)
    try:
        quieted = progress.Quieted(cmd, filter_out=out, filter_err=err, env=env)
        proc = quieted.proc
    except FileNotFoundError:
        raise ToolMissingError(f"{cmd[0]}: command not found") from None
    except PermissionError:
        raise ProfplugError(f"{cmd[0]}: permission denied") from None
    received: list[int] = []
    pending: list[float] = []  # when a SIGINT still to forward arrived

    def forward(signum: int, frame: Any) -> None:
        received.append(signum)
        if proc.poll() is not None:
            return
        if signum == signal.SIGTERM or (signum == signal.SIGINT and pending):
            proc.send_signal(signum)
            pending.clear()
        else:
            pending.append(time.monotonic())

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                rc = proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if pending and time.monotonic() - pending[0] >= SIGINT_GRACE_S:
                    pending.clear()
                    proc.send_signal(signal.SIGINT)
            except KeyboardInterrupt:  # pragma: no cover - forward() already ran
                continue
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        quieted.join()
    rc = 128 - rc if rc < 0 else rc
    if signal.SIGINT in received and rc == 0:
        rc = 128 + signal.SIGINT  # interrupted, even if the job exited cleanly
    return JobEnd(rc, proc.pid, tuple(received))


def _env_summary(env: dict[str, str]) -> dict[str, str]:
    """The variables that change how the job runs (not a container's long NVIDIA_* labels)."""
    return {k: v for k, v in sorted(env.items())
            if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def _rank_status(out: Path) -> list[dict[str, Any]]:
    records = []
    for p in sorted((out / "status").glob("rank*.json")):
        try:
            records.append(json.loads(p.read_text()))
        except (OSError, ValueError) as exc:
            records.append({"file": p.name, "status": "unreadable", "error": str(exc)})
    return sorted(records, key=lambda r: r.get("rank", -1))


def missing_ranks(out: Path, ranks: list[dict[str, Any]]) -> list[int]:
    """Ranks of the job's world (world size from the status files) with no Kineto trace."""
    world = max((int(r["world_size"]) for r in ranks
                 if isinstance(r.get("world_size"), int)), default=0)
    have = {int(p.name[4:-8]) for p in (out / "kineto").glob("rank*.json.gz")
            if p.name[4:-8].isdigit()}
    return [r for r in range(world) if r not in have]


def write_run_json(out: Path, info: dict[str, Any]) -> None:
    ranks = _rank_status(out)
    outcome.settle(ranks, info.get("job_pid"), info.get("exit_status"))
    step_fns = info.get("options", {}).get("step_fns") or []
    options = info.get("options", {})
    no_window = outcome.window_problem(ranks, options)
    info = {**info, "warnings": [*info.get("warnings", []),
                                 *outcome.step_fn_warnings(step_fns, ranks),
                                 *outcome.sync_site_warnings(ranks)],
            "step_fns": outcome.step_fn_summary(step_fns, ranks),
            "no_window": no_window}
    if options.get("trace", "kineto") != "none":
        try:
            from profplug.analyzers.steps.observer import observer_from_ranks

            info["observer"] = observer_from_ranks(ranks)
        except Exception as exc:  # never lose run.json over a summary
            info["observer"] = {"error": f"{type(exc).__name__}: {exc}"}
    if info.get("options", {}).get("trace", "kineto") == "kineto":
        info = {**info, "missing_ranks": missing_ranks(out, ranks)}
    versions = dict(next((r.get("versions") for r in ranks if r.get("versions")), {}) or {})
    versions["profplug"] = __version__
    info = {
        **info,
        "versions": versions,
        "gpus": sorted({r["versions"]["gpu"] for r in ranks
                        if (r.get("versions") or {}).get("gpu")}),
        "ranks": ranks,
    }
    replace_text(out / "run.json", json.dumps(info, indent=1, default=str))


def run(opts: RunOptions) -> int:
    """Launch the job, collect its traces, print the report; returns the job's exit status."""
    if not opts.command:
        raise ProfplugError("no command given: profplug run -o DIR -- CMD ...")
    config = opts.config()
    opts = replace(opts, step_fns=list(config.step_fns))  # paths made absolute
    nsys = nsys_for_run(opts.nsys) if opts.trace == "nsys" else None
    prepare_out(opts.out, opts.force)
    env = child_env(config, opts.extra_env)
    cmd = nsys_command(nsys, opts.out, opts.command) if nsys else list(opts.command)
    if nsys:
        (opts.out / "nsys").mkdir(exist_ok=True)
    info: dict[str, Any] = {
        "command": list(opts.command),
        "launched": cmd,
        "cwd": os.getcwd(),
        # paths stored resolved: run.json is read from other folders than this one
        "options": {k: (os.path.realpath(v) if isinstance(v, Path) else v)
                    for k, v in asdict(opts).items() if k not in ("command", "extra_env")},
        "env": _env_summary(env),
        "python": sys.version.split()[0],
        "started": time.time(),
    }
    job = _run_forwarding_signals(cmd, env, quiet=nsys is not None)
    info.update(ended=time.time(), exit_status=job.status, job_pid=job.pid,
                signals=[signal.Signals(s).name for s in job.signals])
    traces = _collect_traces(opts, nsys, info)
    write_run_json(opts.out, info)
    return _summarize(opts, traces, job.status)


def _collect_traces(opts: RunOptions, nsys: str | None, info: dict[str, Any]) -> list[Path]:
    """The run's traces (nsys's report exported to SQLite first), noted in ``info``."""
    traces: list[Path] = [opts.out / "kineto"] if opts.trace == "kineto" else []
    if nsys:
        rep = opts.out / "nsys" / "report.nsys-rep"
        sqlite = opts.out / "nsys" / "report.sqlite"
        if rep.exists():
            progress.run_quieted([nsys, "export", "--type", "sqlite", "--force-overwrite",
                                  "true", "-o", str(sqlite), str(rep)])
        traces = [sqlite]
        info["nsys_report"] = os.path.realpath(rep)
    info["traces"] = [os.path.realpath(p) for p in traces]  # resolved, as the options
    return traces


def _summarize(opts: RunOptions, traces: list[Path], rc: int) -> int:
    """After the job: the report, what went wrong and the observer effect on stderr; the
    exit status (the job's, or ``NO_WINDOW_EXIT`` when it succeeded but nothing was
    profiled)."""
    run_json = json.loads((opts.out / "run.json").read_text())
    missing = run_json.get("missing_ranks")
    if missing:
        print(f"profplug: warning: missing ranks: {missing} (no trace: killed before "
              "flushing?)", file=sys.stderr)
    no_trace = outcome.trace_problem(opts.out, opts.trace, run_json["ranks"])
    if opts.report and traces and not no_trace:
        _report(traces, opts.out / "report.html")
    for line in outcome.nsys_views(opts.out) if opts.trace == "nsys" else []:
        print(f"profplug: {line}", file=sys.stderr)
    for line in outcome.failure_lines(run_json["ranks"]):
        print(f"profplug: {line}", file=sys.stderr)
    for line in run_json["warnings"]:
        print(f"profplug: warning: {line}", file=sys.stderr)
    observer = run_json.get("observer") or {}
    if observer.get("line"):
        print(f"profplug: {observer['line']}", file=sys.stderr)
    if observer.get("warning"):
        print(f"profplug: warning: {observer['warning']}", file=sys.stderr)
    nothing = run_json.get("no_window") or no_trace
    if nothing and rc == 0:  # a failed job: its failure is the news
        print(f"profplug: {nothing}", file=sys.stderr)
        return outcome.NO_WINDOW_EXIT
    if no_trace and opts.report:
        print("profplug: no trace was written; no report", file=sys.stderr)
    return rc


def _report(traces: list[Path], html: Path) -> None:
    if not any(p.exists() for p in traces):  # nsys's report, not exported
        print(f"profplug: no trace to report: {', '.join(map(str, traces))} was not written",
              file=sys.stderr)
        return
    from profplug.analyzers.commands.report import run_report

    try:
        run_report(traces, html=html)
    except ProfplugError as exc:
        print(f"profplug: report failed: {exc}", file=sys.stderr)
