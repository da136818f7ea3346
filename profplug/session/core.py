"""One rank's profiling session: the window over steps, alignment, flush, status file.

Window: with steps (``profplug.step()``, ``--step-fn`` functions or Megatron-Core's
``run_one_forward_step``, see :mod:`profplug.steps`), steps ``[skip, skip + steps)``
(0-based step index); Kineto is prepared one step early, ranks meet at a barrier right
before the first window step (when torch.distributed is initialized), and recording stops
when the last window step ends. Without steps, recording starts at the first profplug p2p or
synchronize call and runs to the end of the process ("run" mode); a later first step
discards it and switches to steps, as does the first step of a higher step source (the
count restarts at 0). An nsys capture range cannot be reopened, so a discarded nsys
capture is kept open instead. Files: ``OUT/kineto/rank{R}.json.gz`` and
``OUT/status/rank{R}.json`` (status "running" from the start when ``RANK`` is known, so a
rank killed outright still leaves a record; the final status at exit, or on a signal before
anything that could block).

With ``PROFPLUG_STEP_TIMING`` each window step is timed (:mod:`profplug.session.steptimer`,
the status file's ``timing``); with ``PROFPLUG_DIGEST`` the outputs passed to
``profplug.digest`` are folded per step (:mod:`profplug.digests`, the status file's
``digest``) on the steps outside the window (before it, and up to
``digests.AFTER_WINDOW`` after it), so the timed steps run the job's own work only.
``profplug ab`` uses both.

Observer effect (a traced run, ``--trace kineto|nsys``): the steps before the window after a
warm-up (``[skip // 2, skip - 1)``: step ``skip - 1`` prepares the profiler) and up to
``steps`` steps after it (from ``skip + steps + SETTLE_STEPS``: the first step after the
window waits for the peers' trace writes) run untraced and are timed with the same step timer
(:mod:`profplug.session.steptimer`, ``events`` mode: CUDA events when the job uses CUDA, else
host wall time), and so is the window itself; the status file's ``timing`` (the traced window)
and ``untraced`` (``before``, ``after``) hold the step times. The status file's
``window.steps_seen`` counts the steps the job began, so that ``profplug run`` can say why a
window never opened.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

import profplug.steps as _steps
from profplug import __version__, digests, policy
from profplug.analyzers.core import ranges
from profplug.annotation import mark
from profplug.config import Config, env_rank
from profplug.session import barrier
from profplug.session.recorders import (
    KinetoRecorder,
    NsysRecorder,
    NullRecorder,
    distributed_info,
)
from profplug.session.steptimer import StepTimer


def _rank() -> int:
    rank = env_rank()
    if rank is not None:
        return rank
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return 0


def _world_size() -> int | None:
    """``WORLD_SIZE`` (torchrun), else torch.distributed's, else None."""
    raw = os.environ.get("WORLD_SIZE", "")
    if raw.strip().isdigit():
        return int(raw)
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    return None


SETTLE_STEPS = 1  # after the window, untimed: it waits for the peers' trace writes


def _noop() -> None:
    return None


class Session:
    """Drives one recorder from step/activity events and flushes it exactly once."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.out = Path(config.out or ".")
        self.recorder: Any = None
        if config.trace == "kineto":
            self.recorder = KinetoRecorder(cpu_ops=config.cpu_ops)
        elif config.trace == "nsys":
            self.recorder = NsysRecorder()
        else:
            self.recorder = NullRecorder()
        self.mode: str | None = None  # "steps" or "run"
        self.first_step: int | None = None
        self.steps_recorded = 0
        self.discarded: list[dict[str, Any]] = []  # windows given up for a later one
        self.aligned = False
        self.align_missing: list[int] = []  # ranks that never reached the last barrier
        self._barriers = 0  # barriers this rank reached: the key of the next one
        self.saved = False
        self.flush_started = False
        self.exception: str | None = None
        self.signal: int | None = None
        self.exit_code: int | None = None  # from sys.exit / SystemExit (session.exitcode)
        self.started = time.time()
        self.timer: StepTimer | None = None  # open while a timed window runs
        self.timing: dict[str, Any] | None = None  # the last timed window's result
        # observer effect: untraced steps before and after the window, timed as the window
        self.observe = config.trace != "none"
        self.untraced: dict[str, Any] = {"before": None, "after": None,
                                         "warmup_steps": config.skip // 2}
        self._untimed: dict[str, StepTimer] = {}  # "before" / "after" while they run
        if config.digest:
            digests.enable(config.skip + config.steps + digests.AFTER_WINDOW,
                           window=(config.skip, config.skip + config.steps))
        self._lock = threading.RLock()
        if env_rank() is not None:  # else the file name could be another rank's
            self._write_status("start")

    # -- events ---------------------------------------------------------------------------
    def on_step_begin(self, index: int) -> None:
        if self.recorder is None or self.flush_started:
            return
        if self.mode == "run":  # a whole-run recording began before the first step
            self._discard("run")
        self.mode = "steps"
        skip = self.config.skip
        if self.observe:
            self._observe_begin(index)
        if index == skip - 1:
            self.recorder.prepare()
        if index == skip:
            timing = self.config.step_timing
            if timing == "off" and self.observe:
                timing = "events"  # the same clock as the untraced steps
            if timing != "off":  # events created before the barrier
                self.timer = StepTimer(self.config.steps, timing)
            self._align()
            self.first_step = index
            self._start()
        timer = self.timer
        if timer is not None:
            timer.mark()

    def _observe_begin(self, index: int) -> None:
        """Untraced step timers: created on their first step, marked at each step begin."""
        skip, steps = self.config.skip, self.config.steps
        lo, after = skip // 2, skip + steps + SETTLE_STEPS
        if index == lo and skip - 1 - lo >= 1 and self.untraced["before"] is None:
            self._untimed["before"] = StepTimer(skip - 1 - lo, "events")
        if index == after and self.untraced["after"] is None and self.first_step is not None:
            self._untimed["after"] = StepTimer(steps, "events")
        for key, timer in list(self._untimed.items()):
            timer.mark()
            if timer.complete:  # "before": at the begin of step skip - 1
                self._close_untimed(key)

    def _close_untimed(self, key: str, cuda_calls: bool = True) -> None:
        timer = self._untimed.pop(key, None)
        if timer is not None and timer.marks > 1:
            self.untraced[key] = timer.result(cuda_calls)

    def on_step_end(self, index: int) -> None:
        after = self._untimed.get("after")
        if after is not None and after.marks == after.n:  # the end of its last step
            after.mark()
            self._close_untimed("after")
        if self.mode != "steps" or self.first_step is None or not self.recorder.running:
            return
        self.steps_recorded = index - self.first_step + 1
        if self.steps_recorded >= self.config.steps:
            if self.timer is not None:
                self.timer.mark()  # the end of the last step
            if self.recorder.name == "nsys":
                self._align()  # the first rank to stop ends the capture for all
            self._save(self.recorder.stop({"profplugWindow": self._window()}, sync=True))
            self._close_timer()

    def on_switch(self, old: str, new: str, dropped: int) -> None:
        """A higher step source took control: its steps restart at 0, a window opened by the
        lower one is given up."""
        digests.reset()  # the step count restarts
        if self.recorder is None or self.flush_started:
            return
        self._discard(f"{dropped} steps from {old} ({new} took control)")

    def _discard(self, what: str) -> None:
        self.discarded.append({"window": what, "steps": self.steps_recorded,
                               "first_step": self.first_step})
        if self.recorder.running and self.recorder.name != "nsys":
            self.recorder.stop({}, sync=True)  # the result is dropped
        self.timer, self.timing = None, None
        self._untimed.clear()
        self.untraced.update(before=None, after=None)
        self.mode, self.first_step, self.steps_recorded, self.saved = None, None, 0, False

    def on_activity(self) -> None:
        """First p2p/synchronize call: record the whole run unless steps take over."""
        _steps.on_activity = _noop
        if self.mode is None and self.recorder is not None and not self.flush_started:
            self.mode = "run"
            self._start()

    # -- internals ------------------------------------------------------------------------
    def _align(self) -> None:
        dist = sys.modules.get("torch.distributed")
        if not self.config.align or dist is None or not dist.is_available():
            return
        if not dist.is_initialized() or dist.get_world_size() < 2:
            return
        # never a bare collective: a rank that never comes (a step function only some ranks
        # call) would hang the others here; a store barrier with a deadline instead
        self._barriers += 1
        timeout = barrier.timeout_s()
        missing = barrier.store_barrier(dist, str(self._barriers), timeout)
        if missing is None:
            return  # no store to count in: the window opens unaligned
        if missing:
            self.align_missing = missing
            self.aligned = False
            sys.stderr.write(
                f"profplug: warning: rank {_rank()}: rank(s) {missing} never reached the "
                f"profiling window's barrier within {timeout:g} s ({barrier.ENV}): the "
                "window opened without them (a step function that only some ranks "
                "call?)\n")
            sys.stderr.flush()
            return
        if "nccl" in str(dist.get_backend()).lower():
            from profplug.p2p import original_synchronize

            flag = torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device()))
            dist.all_reduce(flag)
            original_synchronize()()  # the host waits too: windows open together
        self.aligned = True

    def _start(self) -> None:
        meta: dict[str, Any] = {}  # profplugWindow is added at stop: Kineto keeps the first
        info = distributed_info()
        if info is not None:
            meta["distributedInfo"] = info
        self.recorder.start(meta)
        mark(ranges.rank_mark(_rank()))  # inside the nsys capture range too

    def _window(self) -> dict[str, Any]:
        return {
            "rank": _rank(),
            "mode": self.mode,
            "first_step": self.first_step,
            "steps": self.steps_recorded,
            "skip": self.config.skip,
            "requested_steps": self.config.steps,
            "aligned": self.aligned,
            "align_missing": self.align_missing,
            "sync": self.config.sync,
            "trace": self.config.trace,
            "step_source": _steps.source(),
            "steps_seen": _steps.count(),
            "wall_s": getattr(self.recorder, "wall_s", None),
            "discarded": self.discarded,
            "pid": os.getpid(),
        }

    def _close_timer(self, cuda_calls: bool = True) -> None:
        if self.timer is not None:
            self.timing = self.timer.result(cuda_calls)
            self.timer = None

    def trace_path(self) -> Path:
        return self.out / "kineto" / f"rank{_rank()}.json.gz"

    def _save(self, result: Any) -> None:
        if self.recorder.name == "kineto" and result is not None:
            self.recorder.save(result, self.trace_path())
            self.saved = True

    # -- end of the process ---------------------------------------------------------------
    def flush(self, reason: str = "exit", from_signal: bool = False) -> None:
        """Stop recording, write the trace and the status file (once; thread-safe)."""
        with self._lock:
            if self.flush_started:
                return
            self.flush_started = True
            if from_signal:  # first, before anything that could block or get us killed
                self._write_status(reason, cuda_calls=False)
            try:
                if not from_signal:
                    _steps.close_open()
                if self.recorder is not None and self.recorder.running:
                    self._save(self.recorder.stop({"profplugWindow": self._window()}, sync=not from_signal))
                self._close_timer(cuda_calls=not from_signal)  # a window cut short
                for key in list(self._untimed):
                    self._close_untimed(key, cuda_calls=not from_signal)
                if self.recorder is not None and self.recorder.name == "kineto" and not self.saved:
                    self.recorder.save_empty(self.trace_path(), {"profplugWindow": self._window()})
                    self.saved = True
            except Exception as exc:  # never hide the job's own failure behind ours
                print(f"profplug: could not write the trace: {exc}", file=sys.stderr)
            finally:
                self._write_status(reason, cuda_calls=not from_signal)

    def _status(self, reason: str) -> str:
        if reason == "start":
            return "running"
        if self.signal is not None:
            return "signal"
        if self.exception is not None:
            return "exception"
        return "exit" if self.exit_code else "finished"

    def _write_status(self, reason: str, cuda_calls: bool = True) -> None:
        status = self._status(reason)
        autosteps = sys.modules.get("profplug.autosteps")
        record: dict[str, Any] = {
            "rank": _rank(),
            "world_size": _world_size(),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "started": self.started,
            "ended": time.time(),
            "status": status,
            "reason": reason,
            "exception": self.exception,
            "signal": self.signal,
            "exit_code": self._exit_code(status),
            "trace": str(self.trace_path().relative_to(self.out)) if self.saved else None,
            "window": self._window(),
            "step_fns": autosteps.targets() if autosteps is not None else [],
            "versions": versions(cuda_calls) if status != "running" else None,
            "timing": self.timing,
            "untraced": self.untraced if self.observe else None,
            "digest": digests.summary(read=cuda_calls) if status != "running" else None,
            "policy": policy.status(),  # what each sync policy reached, its switches
        }
        path = self.out / "status" / f"rank{record['rank']}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(record, indent=1))
            os.replace(tmp, path)
        except OSError as exc:
            print(f"profplug: could not write {path}: {exc}", file=sys.stderr)


    def _exit_code(self, status: str) -> int | None:
        """The process's exit status as far as Python decides it (None: not known yet, or
        a signal ends it)."""
        if status in ("running", "signal"):
            return None
        if status == "exception":
            return 1
        return self.exit_code or 0


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
    if cuda_calls and torch.cuda.is_available():
        try:
            v["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:
            pass
        if torch.cuda.is_initialized():
            v["gpu"] = torch.cuda.get_device_name(torch.cuda.current_device())
    return v
