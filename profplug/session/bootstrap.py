"""Activation at interpreter start-up (called by profplug's ``sitecustomize``; stdlib only).

A process activates when ``PROFPLUG_OUT`` is set, it is not a launcher (torchrun,
``python -m torch.distributed.run``) and no ancestor activated (``PROFPLUG_OWNER_PID``).
Activation only registers post-import hooks: the session starts when the job imports
torch; the built-in declarations (``profplug.libraries``) and every ``--sync-site
MODULE:QUALNAME`` are applied when the job imports their modules (Megatron-Core's p2p
functions with ``communication_utils``, its ``run_one_forward_step`` steps with
``abstract_model_inference_wrapper``, transformers' with ``pipeline_parallel``), and each
``--step-fn MODULE:QUALNAME`` is patched when the job imports MODULE (once its body has
finished: ``profplug.hooks``); a function of the script itself (``__main__``, its path) is
watched for from the job's ``import torch`` on (``profplug.scriptsteps``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from profplug.config import ENV_OWNER_PID, Config, is_step_fn_path

LAUNCHER_SCRIPTS = frozenset({"torchrun", "torchx", "nsys"})
LAUNCHER_MODULES = frozenset(
    {"torch.distributed.run", "torch.distributed.launch", "profplug", "profplug.cli.main"}
)
_FLAGS_WITH_VALUE = frozenset({"-X", "-W", "-Q"})


def is_launcher(argv: Sequence[str]) -> bool:
    """Whether ``sys.orig_argv`` (interpreter first) runs a launcher, not a rank."""
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-m":
            return i + 1 < len(args) and args[i + 1] in LAUNCHER_MODULES
        if a == "-c" or a == "-":
            return False
        if a in _FLAGS_WITH_VALUE:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        name = os.path.basename(a)
        return name in LAUNCHER_SCRIPTS or name == "profplug"
    return False


def _on_torch(config: Config) -> None:
    import profplug.steps as steps
    from profplug.analyzers.core.ranges import rank_mark
    from profplug.annotation import mark
    from profplug.config import env_rank
    from profplug.session import exitcode
    from profplug.session.core import Session
    from profplug.session.signals import install

    if "synchronize" in config.patches:
        from profplug.patching import patch_synchronize

        patch_synchronize()
    session = Session(config)  # the rank's one session: its hooks below keep it
    steps.add_listener(session.on_step_begin, session.on_step_end, session.on_switch,
                       on_activity=session.on_activity)
    install(session)
    exitcode.install(session.end)
    try:
        from profplug.session import switcher

        switcher.install()  # profplug ab --switch-every: after the session's listener
    except ValueError as exc:
        sys.stderr.write(f"profplug: policy switching off: {exc}\n")
    if config.step_fns:
        from profplug.autosteps import patch_step_fn

        for spec in config.step_fns:  # known from the start: a module never imported shows
            patch_step_fn(spec)
    rank = env_rank()
    if rank is not None:
        mark(rank_mark(rank))


def _on_sync_site(spec: str, module: ModuleType) -> None:
    from profplug.sites import declare

    declare(spec)


def _on_step_fn_module(spec: str, module: ModuleType) -> None:
    from profplug.autosteps import patch_step_fn

    patch_step_fn(spec)


def activate(environ: dict[str, str] | None = None) -> bool:
    """Activate profplug in this process if the environment asks for it."""
    env = os.environ if environ is None else environ
    try:
        config = Config.from_env(env)
    except ValueError as exc:
        sys.stderr.write(f"profplug: not activated: {exc}\n")
        return False
    if not config.active:
        return False
    owner = env.get(ENV_OWNER_PID)
    if owner and owner != str(os.getpid()):
        return False
    if is_launcher(getattr(sys, "orig_argv", sys.argv)):
        return False
    os.environ[ENV_OWNER_PID] = str(os.getpid())
    from profplug import hooks

    hooks.when_imported("torch", lambda _m: _on_torch(config))
    from profplug.libraries import LIBRARIES
    from profplug.patching import patch_library  # stdlib only until a module is imported

    for name in LIBRARIES:  # each waits for its own modules (a namespace package, as
        if name in config.patches:  # ``megatron``, runs no hook of its own)
            patch_library(name)
    for spec in config.sync_sites:
        hooks.when_imported(spec.rpartition(":")[0], functools.partial(_on_sync_site, spec))
    for spec in config.step_fns:  # before the job can bind the function by name
        module = spec.rpartition(":")[0]
        if module != "__main__" and not is_step_fn_path(module):  # the script: at torch
            hooks.when_imported(module, functools.partial(_on_step_fn_module, spec))
    return True
