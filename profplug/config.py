"""The environment contract between ``profplug run`` and the ranks it profiles (stdlib only,
and the words of ``analyzers/core/vocabulary.py``).

| variable | values (default) | meaning |
| --- | --- | --- |
| ``PROFPLUG_OUT`` | directory (unset) | set: every Python process of the job activates profplug |
| ``PROFPLUG_TRACE`` | ``kineto`` / ``nsys`` / ``none`` (``kineto``) | how ranks record; ``none``: patches, sync policy, steps and status only, no profiler |
| ``PROFPLUG_SYNC`` | ``device`` / ``event`` / ``none`` / ``keep`` (unset) | default ``sync=`` policy of ``profplug.p2p``; unset or ``keep`` = ``device`` (Megatron's behaviour) |
| ``PROFPLUG_PATCH`` | comma list of ``megatron``, ``transformers``, ``synchronize`` (all three) | patches applied at start-up; ``none`` = no patch. ``megatron`` and ``transformers`` are the built-in sync sites and steps (``profplug.libraries``): each ``run_one_forward_step`` of Megatron-Core's inference wrappers, or each ``pipeline_parallel_naive_forward`` of transformers, is one step |
| ``PROFPLUG_SYNC_SITE`` | comma list of ``MODULE:QUALNAME`` (unset) | declared sync sites (``profplug.sites``): each call annotated, the sync policy applied to the synchronizes inside it (``profplug run --sync-site``) |
| ``PROFPLUG_STEP_FN`` | comma list of ``MODULE:QUALNAME`` (unset); MODULE a name, ``__main__`` or a ``.py`` path | functions whose outermost calls are steps, patched when MODULE is imported, or when the script defines them (``profplug run --step-fn``) |
| ``PROFPLUG_SKIP`` | int >= 0 (``10``) | steps before the window |
| ``PROFPLUG_STEPS`` | int >= 1 (``50``) | steps in the window |
| ``PROFPLUG_CPU_OPS`` | ``0`` / ``1`` (``0``) | Kineto: record every CPU op, not only profplug ranges |
| ``PROFPLUG_ALIGN`` | ``0`` / ``1`` (``1``) | barrier across ranks right before the window opens |
| ``PROFPLUG_STEP_TIMING`` | ``off`` / ``host`` / ``events`` (``off``) | time each window step (``profplug.session.steptimer``): ``host`` = perf counter only; ``events`` = a CUDA event per step boundary too (host only without CUDA); into the status file |
| ``PROFPLUG_DIGEST`` | ``0`` / ``1`` (``0``) | ``profplug.digest(tensor)`` folds outputs into per-step digests (``profplug.digests``); Megatron's ``broadcast_from_last_pipeline_stage`` result is digested automatically |
| ``PROFPLUG_SWITCH_EVERY`` | int >= 0 (``0``) | ``profplug ab --switch-every``: flip the policy every N steps (``profplug.session.switcher``) |
| ``PROFPLUG_SWITCH_ORDER`` | comma list of ab labels (unset) | the block order of a switched run, e.g. ``event,device`` (``device2``: an A/A's second label) |
| ``PROFPLUG_OWNER_PID`` | pid (set by profplug) | the process that activated; its descendants do not |

Ranks read their rank from ``RANK`` (torchrun), else ``torch.distributed``, else 0.
Steps come from ``--step-fn`` functions, else ``profplug.step()`` in the job, else
Megatron-Core's ``run_one_forward_step`` or transformers' ``pipeline_parallel_naive_forward``:
the first step of a higher source restarts the count (see ``profplug.steps``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from profplug.analyzers.core.vocabulary import StepTiming, SyncPolicy, TraceKind

ENV_OUT = "PROFPLUG_OUT"
ENV_TRACE = "PROFPLUG_TRACE"
ENV_SYNC = "PROFPLUG_SYNC"
ENV_PATCH = "PROFPLUG_PATCH"
ENV_STEP_FN = "PROFPLUG_STEP_FN"
ENV_SYNC_SITE = "PROFPLUG_SYNC_SITE"
ENV_SKIP = "PROFPLUG_SKIP"
ENV_STEPS = "PROFPLUG_STEPS"
ENV_CPU_OPS = "PROFPLUG_CPU_OPS"
ENV_ALIGN = "PROFPLUG_ALIGN"
ENV_OWNER_PID = "PROFPLUG_OWNER_PID"
ENV_STEP_TIMING = "PROFPLUG_STEP_TIMING"
ENV_DIGEST = "PROFPLUG_DIGEST"
ENV_SWITCH_EVERY = "PROFPLUG_SWITCH_EVERY"
ENV_SWITCH_ORDER = "PROFPLUG_SWITCH_ORDER"

SYNC_POLICIES = tuple(SyncPolicy)
SYNC_CHOICES = ("keep", *SYNC_POLICIES)
PATCHES = ("megatron", "transformers", "synchronize")
DEFAULT_SKIP = 10
DEFAULT_STEPS = 50


def sync_policy(explicit: str | None = None,
                environ: Mapping[str, str] | None = None) -> SyncPolicy:
    """The policy to use: ``explicit`` if given, else ``PROFPLUG_SYNC``, else ``device``."""
    value = explicit
    if value is None:
        value = (environ if environ is not None else os.environ).get(ENV_SYNC, "") or "keep"
    value = value.strip().lower()
    if value == "keep":
        return SyncPolicy.DEVICE
    if value not in SYNC_POLICIES:
        raise ValueError(f"sync policy must be one of {', '.join(SYNC_CHOICES)}, got {value!r}")
    return SyncPolicy(value)


def parse_patches(text: str) -> tuple[str, ...]:
    """``"megatron,synchronize"`` -> ("megatron", "synchronize"); ``"none"``/"" -> ()."""
    names = tuple(p.strip().lower() for p in text.split(",") if p.strip())
    if names in ((), ("none",)):
        return ()
    bad = [n for n in names if n not in PATCHES]
    if bad:
        raise ValueError(f"unknown patch {bad[0]!r}: choose from {', '.join(PATCHES)}")
    return names


def is_step_fn_path(module: str) -> bool:
    """``MODULE`` of ``MODULE:QUALNAME`` is a file path (``x/y.py``), not a module name."""
    return module.endswith(".py") or "/" in module or os.sep in module


def parse_step_fn(text: str) -> tuple[str, str]:
    """``"pkg.mod:Class.method"`` -> ("pkg.mod", "Class.method"), or ValueError. MODULE may be
    ``__main__`` (the script) or a file path ending in ``.py`` (``jobs/run.py:decode``)."""
    module, sep, qualname = text.strip().rpartition(":")
    named = is_step_fn_path(module) or all(p.isidentifier() for p in module.split("."))
    ok = sep and module and named and all(p.isidentifier() for p in qualname.split("."))
    if not ok:
        raise ValueError(f"step function must be MODULE:QUALNAME (e.g. mymod:decode, "
                         f"mymod:Engine.step, __main__:decode or path/to/job.py:decode), "
                         f"got {text!r}")
    if is_step_fn_path(module) and not module.endswith(".py"):
        raise ValueError(f"{text}: a file path must end in .py")
    return module, qualname


def parse_step_fns(text: str) -> tuple[str, ...]:
    """``"a:f, b:C.m"`` -> ("a:f", "b:C.m"), each checked by :func:`parse_step_fn`."""
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    for name in names:
        parse_step_fn(name)
    return tuple(dict.fromkeys(names))


def parse_sync_sites(text: str) -> tuple[str, ...]:
    """``"a:f, b:C.m"`` -> ("a:f", "b:C.m"): module names (not paths), each checked by
    :func:`parse_step_fn`."""
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    for name in names:
        module, _ = parse_step_fn(name)
        if is_step_fn_path(module) or module == "__main__":
            raise ValueError(f"{name}: a sync site's MODULE must be an importable module name")
    return tuple(dict.fromkeys(names))


def _int(environ: Mapping[str, str], key: str, default: int, minimum: int) -> int:
    raw = environ.get(key, "")
    try:
        value = int(raw) if raw.strip() else default
    except ValueError:
        raise ValueError(f"{key} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{key} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class Config:
    """What a rank should do, as read from the environment."""

    out: str | None
    trace: TraceKind = TraceKind.KINETO
    sync: str = "keep"  # a SYNC_CHOICES word: "keep" or a SyncPolicy
    patches: tuple[str, ...] = PATCHES
    step_fns: tuple[str, ...] = ()
    sync_sites: tuple[str, ...] = ()
    skip: int = DEFAULT_SKIP
    steps: int = DEFAULT_STEPS
    cpu_ops: bool = False
    align: bool = True
    step_timing: StepTiming = StepTiming.OFF
    digest: bool = False

    def __post_init__(self) -> None:  # a word given as a plain str becomes its member
        object.__setattr__(self, "trace", TraceKind.parse(self.trace, ENV_TRACE))
        object.__setattr__(self, "step_timing",
                           StepTiming.parse(self.step_timing, ENV_STEP_TIMING))

    @property
    def active(self) -> bool:
        return bool(self.out)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        env = os.environ if environ is None else environ
        trace = TraceKind.parse(env.get(ENV_TRACE, "").strip().lower() or TraceKind.KINETO,
                                ENV_TRACE)
        sync = env.get(ENV_SYNC, "").strip().lower() or "keep"
        sync_policy(sync)  # validates
        timing = StepTiming.parse(env.get(ENV_STEP_TIMING, "").strip().lower()
                                  or StepTiming.OFF, ENV_STEP_TIMING)
        return cls(
            out=env.get(ENV_OUT) or None,
            trace=trace,
            sync=sync,
            patches=parse_patches(env.get(ENV_PATCH, ",".join(PATCHES))),
            step_fns=parse_step_fns(env.get(ENV_STEP_FN, "")),
            sync_sites=parse_sync_sites(env.get(ENV_SYNC_SITE, "")),
            skip=_int(env, ENV_SKIP, DEFAULT_SKIP, 0),
            steps=_int(env, ENV_STEPS, DEFAULT_STEPS, 1),
            cpu_ops=env.get(ENV_CPU_OPS, "0").strip() in ("1", "true", "yes"),
            align=env.get(ENV_ALIGN, "1").strip() not in ("0", "false", "no"),
            step_timing=timing,
            digest=env.get(ENV_DIGEST, "0").strip() in ("1", "true", "yes"),
        )

    def to_env(self) -> dict[str, str]:
        """The variables that reproduce this config in a child process."""
        env = {
            ENV_TRACE: str(self.trace),
            ENV_SYNC: self.sync,
            ENV_PATCH: ",".join(self.patches) or "none",
            ENV_SKIP: str(self.skip),
            ENV_STEPS: str(self.steps),
            ENV_CPU_OPS: "1" if self.cpu_ops else "0",
            ENV_ALIGN: "1" if self.align else "0",
        }
        if self.step_timing != StepTiming.OFF:
            env[ENV_STEP_TIMING] = str(self.step_timing)
        if self.digest:
            env[ENV_DIGEST] = "1"
        if self.step_fns:
            env[ENV_STEP_FN] = ",".join(self.step_fns)
        if self.sync_sites:
            env[ENV_SYNC_SITE] = ",".join(self.sync_sites)
        if self.out:
            env[ENV_OUT] = self.out
        return env


def env_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """The rank from ``RANK`` if set and numeric, else None."""
    raw = (os.environ if environ is None else environ).get("RANK", "")
    return int(raw) if raw.strip().isdigit() else None
