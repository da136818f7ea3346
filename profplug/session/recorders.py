"""What records a rank's window: Kineto (torch.profiler's engine), nsys (cudaProfilerApi) or
nothing (``--trace none``: the window is only timed).

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


def _experimental_config(cuda: bool) -> Any:
    from torch._C._profiler import _ExperimentalConfig

    # PROFPLUG_KINETO_SYNC_EVENTS=0 / PROFPLUG_KINETO_ALL_THREADS=0: measure their observer
    # effect (see sample_traces/README.md); both default on.
    sync_events = cuda and os.environ.get("PROFPLUG_KINETO_SYNC_EVENTS", "1") != "0"
    all_threads = os.environ.get("PROFPLUG_KINETO_ALL_THREADS", "1") != "0"
    for kwargs in (
        {"enable_cuda_sync_events": sync_events, "profile_all_threads": all_threads},
        {"enable_cuda_sync_events": sync_events},
        {},
    ):
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


class KinetoRecorder:
    """Start/stop Kineto through torch's low-level profiler API (needed for record scopes)."""

    name = "kineto"

    def __init__(self, cpu_ops: bool = False) -> None:
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
        self.running = False

    def prepare(self) -> None:
        """Initialise Kineto/CUPTI ahead of the window (the slow part of a start)."""
        if not self.prepared:
            torch.autograd._prepare_profiler(self.config, self.activities)
            self.prepared = True

    def start(self, metadata: dict[str, Any]) -> None:
        self.prepare()
        _tprof._run_on_profiler_start()  # profplug.annotate follows this hook
        try:
            torch.autograd._enable_profiler(self.config, self.activities, self.scopes)
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

    @staticmethod
    def save(result: Any, path: Path) -> None:
        """Write ``result`` as gzipped Chrome-trace JSON, atomically (tmp + rename)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = path.with_name(path.name + f".{os.getpid()}.tmp.json")
        gz = path.with_name(path.name + f".{os.getpid()}.tmp")
        try:
            result.save(str(raw))
            with open(raw, "rb") as src, gzip.open(gz, "wb", compresslevel=3) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(gz, path)
        finally:
            for p in (raw, gz):
                if p.exists():
                    p.unlink()

    @staticmethod
    def save_empty(path: Path, metadata: dict[str, Any]) -> None:
        """A valid trace with no events: the rank never reached its window."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        with gzip.open(tmp, "wt") as f:
            json.dump({"traceEvents": [], "schemaVersion": 1, **metadata}, f)
        os.replace(tmp, path)


class NsysRecorder:
    """Open/close an nsys capture range (``--capture-range=cudaProfilerApi``)."""

    name = "nsys"

    def __init__(self) -> None:
        self.cuda = torch.cuda.is_available()
        self.running = False

    def prepare(self) -> None:
        pass

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


class NullRecorder:
    """``--trace none``: no profiler; the window is still opened (after the alignment
    barrier) and timed on the host, up to the end of its GPU work (``wall_s``)."""

    name = "none"

    def __init__(self) -> None:
        self.running = False
        self.t0 = 0.0
        self.wall_s: float | None = None

    def prepare(self) -> None:
        pass

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
