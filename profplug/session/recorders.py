"""What records a rank's window: Kineto (torch.profiler's engine), nsys (cudaProfilerApi) or
nothing (``--trace none``: the window is only timed). Each is a :class:`Recorder`: what
differs between them (a trace file to write, a capture range that cannot be reopened, a host
clock) lives in its class, not in the session (:mod:`profplug.session.core`).

Kineto configuration (the observer effect is the product's problem, so it is kept small):
- activities: CPU always (torch only turns ``record_function`` ranges into ``user_annotation``
  events with the CPU activity on), CUDA when a GPU is present (runtime API, kernels, memcpy);
- record scopes: ``{USER_SCOPE}`` unless ``cpu_ops``: profplug's ranges are recorded, aten
  ops are not (verified on torch 2.13 CPU: only ``user_annotation`` events remain);
- ``enable_cuda_sync_events`` on CUDA (``cuda_sync`` events), ``profile_all_threads`` so a
  watcher thread can flush the trace while the main thread is stuck in a CUDA call.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
import torch.autograd.profiler as _tprof

from profplug.analyzers.core.atomicfile import replace_bytes, write_atomic


def _experimental_config(cuda: bool) -> Any:
    from torch._C._profiler import _ExperimentalConfig

    # PROFPLUG_KINETO_SYNC_EVENTS=0 / PROFPLUG_KINETO_ALL_THREADS=0: measure their observer
    # effect (see sample_traces/README.md); both default on.
    sync_events = cuda and os.environ.get("PROFPLUG_KINETO_SYNC_EVENTS", "1") != "0"
    all_threads = os.environ.get("PROFPLUG_KINETO_ALL_THREADS", "1") != "0"
    options: tuple[dict[str, Any], ...] = (
        {"enable_cuda_sync_events": sync_events, "profile_all_threads": all_threads},
        {"enable_cuda_sync_events": sync_events},
        {},
    )
    for kwargs in options:
        try:
            return _ExperimentalConfig(**kwargs)
        except TypeError:
            continue
    return _ExperimentalConfig()


def distributed_info() -> dict[str, Any] | None:
    """Kineto's ``distributedInfo`` block (as torch.profiler writes it), or None."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    backend = str(dist.get_backend())
    info: dict[str, Any] = {
        "backend": backend,
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
    }
    try:
        info["pg_count"] = dist.get_pg_count()
        info["pg_config"] = dist.distributed_c10d._get_all_pg_configs()
    except Exception:  # private helpers: optional
        pass
    if "nccl" in backend and torch.cuda.is_available():
        info["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    return info


class Recorder:
    """What the session asks of a recorder; the defaults are a profiler that writes no file."""

    traced = True  # a profiler records the window (its observer effect is measured)
    meets_before_stop = False  # the ranks meet before the window's stop

    def __init__(self) -> None:
        self.running = False
        self.wall_s: float | None = None  # the window's host time, where measured

    def prepare(self) -> None:
        """Get ready ahead of the window (the step before it)."""

    def start(self, metadata: dict[str, Any]) -> None:
        self.running = True

    def stop(self, metadata: dict[str, Any], sync: bool = True) -> Any:
        """End the window; ``sync`` waits for queued GPU work first (not from a signal)."""
        self.running = False
        return None

    def finish(self, metadata: dict[str, Any], path: Path, sync: bool = True) -> bool:
        """Stop and keep the window; whether a trace file was written at ``path``."""
        self.stop(metadata, sync)
        return False

    def give_up(self) -> None:
        """A window discarded for a later one: stop it, drop what it recorded."""
        if self.running:
            self.stop({}, sync=True)

    def write_empty(self, path: Path, metadata: dict[str, Any]) -> bool:
        """At exit, when no window was kept: whether an empty trace was written at ``path``."""
        return False


class KinetoRecorder(Recorder):
    """Start/stop Kineto through torch's low-level profiler API (needed for record scopes)."""

    def __init__(self, cpu_ops: bool = False) -> None:
        super().__init__()
        from torch._C._profiler import (
            ProfilerActivity,
            ProfilerConfig,
            ProfilerState,
            RecordScope,
        )

        self.cuda = torch.cuda.is_available()
        self.activities = {ProfilerActivity.CPU}
        if self.cuda:
            self.activities.add(ProfilerActivity.CUDA)
            if os.environ.get("PROFPLUG_KINETO_CPU", "1") == "0":  # observer-effect study
                self.activities.discard(ProfilerActivity.CPU)
        self.scopes = set() if cpu_ops else {RecordScope.USER_SCOPE}
        exp = _experimental_config(self.cuda)
        flags = (False, False, False, False, False)  # shapes, memory, stack, flops, modules
        try:
            self.config = ProfilerConfig(ProfilerState.KINETO, *flags, exp, "")
        except TypeError:  # torch without trace ids
            self.config = ProfilerConfig(ProfilerState.KINETO, *flags, exp)
        self.prepared = False

    def prepare(self) -> None:
        """Initialise Kineto/CUPTI ahead of the window (the slow part of a start)."""
        if not self.prepared:
            torch.autograd._prepare_profiler(self.config, self.activities)
            self.prepared = True

    def start(self, metadata: dict[str, Any]) -> None:
        self.prepare()
        _tprof._run_on_profiler_start()  # profplug.annotate follows this hook
        try:
            torch.autograd._enable_profiler(self.config, self.activities,  # type: ignore[call-arg]  # torch's .pyi lacks the binding's scopes
                                            self.scopes)
        except TypeError:  # no record scopes in this torch: every op is recorded
            torch.autograd._enable_profiler(self.config, self.activities)
        self.running = True
        for key, value in metadata.items():
            torch.autograd._add_metadata_json(key, json.dumps(value))

    def stop(self, metadata: dict[str, Any], sync: bool = True) -> Any:
        """End the window; ``sync`` waits for queued GPU work first (not from a signal)."""
        if not self.running:
            return None
        for key, value in metadata.items():
            torch.autograd._add_metadata_json(key, json.dumps(value))
        if sync and self.cuda and torch.cuda.is_initialized():
            from profplug.p2p import original_synchronize

            original_synchronize()()
        self.running = False
        self.prepared = False
        try:
            return torch.autograd._disable_profiler()
        finally:
            _tprof._run_on_profiler_stop()

    def finish(self, metadata: dict[str, Any], path: Path, sync: bool = True) -> bool:
        result = self.stop(metadata, sync)
        if result is None:
            return False
        self.save(result, path)
        return True

    @staticmethod
    def save(result: Any, path: Path) -> None:
        """Write ``result`` as gzipped Chrome-trace JSON, atomically (tmp + rename)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = path.with_name(path.name + f".{os.getpid()}.tmp.json")
        try:
            result.save(str(raw))

            def gzipped(fh: Any) -> None:
                with open(raw, "rb") as src, gzip.GzipFile(fileobj=fh, mode="wb",
                                                           compresslevel=3) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)

            write_atomic(path, gzipped)
        finally:
            if raw.exists():
                raw.unlink()

    def write_empty(self, path: Path, metadata: dict[str, Any]) -> bool:
        """A valid trace with no events: the rank never reached its window."""
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = json.dumps({"traceEvents": [], "schemaVersion": 1, **metadata})
        replace_bytes(path, gzip.compress(doc.encode()))
        return True


class NsysRecorder(Recorder):
    """Open/close an nsys capture range (``--capture-range=cudaProfilerApi``). The first rank
    to stop ends the capture for all: the ranks meet first. A capture range cannot be
    reopened: a window given up keeps it open."""

    meets_before_stop = True

    def __init__(self) -> None:
        super().__init__()
        self.cuda = torch.cuda.is_available()

    def start(self, metadata: dict[str, Any]) -> None:
        if self.cuda:
            torch.cuda.profiler.start()
        self.running = True

    def stop(self, metadata: dict[str, Any], sync: bool = True) -> Any:
        """End the capture range. Not from a signal (``sync=False``): the process is about to
        die, nsys ends the capture when it does, and cudaProfilerStop could wait behind a
        main thread stuck in a CUDA call."""
        if self.running and self.cuda and sync:
            if torch.cuda.is_initialized():
                from profplug.p2p import original_synchronize

                original_synchronize()()
            torch.cuda.profiler.stop()
        self.running = False
        return None

    def give_up(self) -> None:
        """Keep the capture open: the next window records into it."""


class NullRecorder(Recorder):
    """``--trace none``: no profiler; the window is still opened (after the alignment
    barrier) and timed on the host, up to the end of its GPU work (``wall_s``)."""

    traced = False

    def __init__(self) -> None:
        super().__init__()
        self.t0 = 0.0

    def start(self, metadata: dict[str, Any]) -> None:
        self.running = True
        self.t0 = time.perf_counter()

    def stop(self, metadata: dict[str, Any], sync: bool = True) -> Any:
        if not self.running:
            return None
        if sync and torch.cuda.is_available() and torch.cuda.is_initialized():
            from profplug.p2p import original_synchronize

            original_synchronize()()
        self.wall_s = time.perf_counter() - self.t0
        self.running = False
        return None


def recorder_for(trace: str, cpu_ops: bool = False) -> Recorder:
    """The recorder of ``--trace`` ``kineto``, ``nsys`` or ``none``."""
    if trace == "kineto":
        return KinetoRecorder(cpu_ops=cpu_ops)
    if trace == "nsys":
        return NsysRecorder()
    return NullRecorder()
