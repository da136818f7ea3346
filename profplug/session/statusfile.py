"""A rank's status file ``OUT/status/rank{R}.json``: who the rank is, how its process ended
(:class:`ProcessEnd`), its window, versions, timing and digests; written atomically."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from profplug import digests, policy
from profplug.analyzers.core.atomicfile import replace_text
from profplug.analyzers.core.version import __version__
from profplug.config import env_rank


def rank() -> int:
    """``RANK`` (torchrun), else torch.distributed's, else 0."""
    r = env_rank()
    if r is not None:
        return r
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return 0


def world_size() -> int | None:
    """``WORLD_SIZE`` (torchrun), else torch.distributed's, else None."""
    raw = os.environ.get("WORLD_SIZE", "")
    if raw.strip().isdigit():
        return int(raw)
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    return None


@dataclass
class ProcessEnd:
    """How the rank's process ends, as its exit, exception and signal hooks learn it
    (:mod:`profplug.session.signals`, :mod:`profplug.session.exitcode`)."""

    started: float = field(default_factory=time.time)
    exception: str | None = None  # an uncaught exception, "Type: message"
    signal: int | None = None
    exit_code: int | None = None  # what sys.exit / exit / quit asked for

    def status(self, reason: str) -> str:
        if reason == "start":
            return "running"
        if self.signal is not None:
            return "signal"
        if self.exception is not None:
            return "exception"
        return "exit" if self.exit_code else "finished"

    def exit_status(self, status: str) -> int | None:
        """The process's exit status as far as Python decides it (None: not known yet, or
        a signal ends it)."""
        if status in ("running", "signal"):
            return None
        if status == "exception":
            return 1
        return self.exit_code or 0


def record(end: ProcessEnd, reason: str, cuda_calls: bool, *, trace: str | None,
           window: dict[str, Any], timing: dict[str, Any] | None,
           untraced: dict[str, Any] | None) -> dict[str, Any]:
    """The status file's object; nothing that could block without ``cuda_calls``."""
    status = end.status(reason)
    autosteps = sys.modules.get("profplug.autosteps")
    sites = sys.modules.get("profplug.sites")
    return {
        "rank": rank(),
        "world_size": world_size(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "argv": list(getattr(sys, "orig_argv", sys.argv)),
        "started": end.started,
        "ended": time.time(),
        "status": status,
        "reason": reason,
        "exception": end.exception,
        "signal": end.signal,
        "exit_code": end.exit_status(status),
        "trace": trace,
        "window": window,
        "step_fns": autosteps.targets() if autosteps is not None else [],
        "sync_sites": sites.states() if sites is not None else [],
        "versions": versions(cuda_calls) if status != "running" else None,
        "timing": timing,
        "untraced": untraced,
        "digest": digests.summary(read=cuda_calls) if status != "running" else None,
        "policy": policy.status(),  # what each sync policy reached, its switches
    }


def write(out: Path, rec: dict[str, Any]) -> None:
    """``out/status/rank{R}.json``, atomically; a failure is reported, never raised."""
    path = out / "status" / f"rank{rec['rank']}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, json.dumps(rec, indent=1))
    except OSError as exc:
        sys.stderr.write(f"profplug: could not write {path}: {exc}\n")


def versions(cuda_calls: bool = True) -> dict[str, Any]:
    """torch/CUDA/NCCL/profplug versions and the GPU of this rank (if CUDA is initialized;
    not without ``cuda_calls``: from a signal, the main thread may hold the CUDA context)."""
    v: dict[str, Any] = {
        "profplug": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "nccl": None,
        "gpu": None,
    }
    for lib in ("transformers", "megatron.core"):  # the pipelines profplug declares
        module = sys.modules.get(lib)
        if module is not None:
            v[lib] = getattr(module, "__version__", None)
    if cuda_calls and torch.cuda.is_available():
        try:
            v["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:
            pass
        if torch.cuda.is_initialized():
            v["gpu"] = torch.cuda.get_device_name(torch.cuda.current_device())
    return v
