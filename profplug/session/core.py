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
``steps`` steps after it (from ``skip + steps + window.SETTLE_STEPS``: the first step after
the window waits for the peers' trace writes) run untraced and are timed with the same step timer
(:mod:`profplug.session.steptimer`, ``events`` mode: CUDA events when the job uses CUDA, else
host wall time), and so is the window itself; the status file's ``timing`` (the traced window)
and ``untraced`` (``before``, ``after``) hold the step times. The status file's
``window.steps_seen`` counts the steps the job began, so that ``profplug run`` can say why a
window never opened.

Who owns what: :class:`Session` drives the rank's :class:`~profplug.session.recorders.Recorder`
(what differs between Kineto, nsys and none lives there) from step and activity events; its
state is the config and the :class:`~profplug.session.window.WindowPlan` (what was asked,
immutable), the :class:`~profplug.session.window.Window` being recorded, the windows given up,
the ranks' meetings (:class:`~profplug.session.barrier.Alignment`), the step clocks
(:class:`~profplug.session.window.StepClocks`) and how the process ends
(:class:`~profplug.session.statusfile.ProcessEnd`, set by the exit and signal hooks).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import profplug.steps as _steps
from profplug import digests
from profplug.analyzers.core import ranges
from profplug.analyzers.core.vocabulary import WindowMode
from profplug.annotation import mark
from profplug.config import Config, env_rank
from profplug.session import statusfile
from profplug.session.barrier import Alignment
from profplug.session.recorders import distributed_info, recorder_for
from profplug.session.statusfile import ProcessEnd, rank
from profplug.session.window import StepClocks, Window, WindowPlan


class Session:
    """Drives one recorder from step/activity events and flushes it exactly once."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.out = Path(config.out or ".")
        self.recorder = recorder_for(config.trace, cpu_ops=config.cpu_ops)
        self.plan = WindowPlan.of(config, traced=self.recorder.traced)
        self.window = Window()
        self.discarded: list[dict[str, Any]] = []  # windows given up for a later one
        self.alignment = Alignment(config.align)
        self.clocks = StepClocks(self.plan)
        self.end = ProcessEnd()
        self.flush_started = False
        if config.digest:
            digests.enable(config.skip + config.steps + digests.AFTER_WINDOW,
                           window=(config.skip, config.skip + config.steps))
        self._lock = threading.RLock()
        if env_rank() is not None:  # else the file name could be another rank's
            self._write_status("start")

    # -- events ---------------------------------------------------------------------------
    def on_step_begin(self, index: int) -> None:
        if self.flush_started:
            return
        if self.window.mode is WindowMode.RUN:  # a whole-run recording began before the first step
            self._discard("run")
        self.window.mode = WindowMode.STEPS
        self.clocks.step_begins(index, window_opened=self.window.first_step is not None)
        if index == self.plan.skip - 1:
            self.recorder.prepare()
        if index == self.plan.skip:
            self.clocks.open_window()  # its CUDA events made before the barrier
            self.alignment.meet(rank())
            self.window.first_step = index
            self._start()
        self.clocks.mark()

    def on_step_end(self, index: int) -> None:
        self.clocks.step_ends()
        w = self.window
        if w.mode is not WindowMode.STEPS or w.first_step is None or not self.recorder.running:
            return
        w.steps = index - w.first_step + 1
        if w.steps >= self.plan.steps:
            self.clocks.mark()  # the end of the last step
            if self.recorder.meets_before_stop:
                self.alignment.meet(rank())
            self._finish(sync=True)
            self.clocks.close_window()

    def on_switch(self, old: str, new: str, dropped: int) -> None:
        """A higher step source took control: its steps restart at 0, a window opened by the
        lower one is given up."""
        digests.reset()  # the step count restarts
        if self.flush_started:
            return
        self._discard(f"{dropped} steps from {old} ({new} took control)")

    def on_activity(self) -> None:
        """First p2p/synchronize call: record the whole run unless steps take over (the
        session stops listening: one call is all it needs)."""
        _steps.remove_listener(on_activity=self.on_activity)
        if self.window.mode is None and not self.flush_started:
            self.window.mode = WindowMode.RUN
            self._start()

    # -- internals ------------------------------------------------------------------------
    def _discard(self, what: str) -> None:
        w = self.window
        self.discarded.append({"window": what, "steps": w.steps, "first_step": w.first_step})
        self.recorder.give_up()
        self.clocks.reset()
        self.window = Window()

    def _start(self) -> None:
        meta: dict[str, Any] = {}  # profplugWindow is added at stop: Kineto keeps the first
        info = distributed_info()
        if info is not None:
            meta["distributedInfo"] = info
        self.recorder.start(meta)
        mark(ranges.rank_mark(rank()))  # inside the nsys capture range too

    def _finish(self, sync: bool) -> None:
        if self.recorder.finish({"profplugWindow": self._window()}, self.trace_path(), sync):
            self.window.saved = True

    def _window(self) -> dict[str, Any]:
        w = self.window
        return {
            "rank": rank(),
            "mode": w.mode,
            "first_step": w.first_step,
            "steps": w.steps,
            "skip": self.config.skip,
            "requested_steps": self.config.steps,
            "aligned": self.alignment.aligned,
            "align_missing": self.alignment.missing,
            "sync": self.config.sync,
            "trace": self.config.trace,
            "step_source": _steps.source(),
            "steps_seen": _steps.count(),
            "wall_s": self.recorder.wall_s,
            "discarded": self.discarded,
            "pid": os.getpid(),
        }

    def trace_path(self) -> Path:
        return self.out / "kineto" / f"rank{rank()}.json.gz"

    # -- end of the process ---------------------------------------------------------------
    def flush(self, reason: str = "exit", from_signal: bool = False) -> None:
        """Stop recording, write the trace and the status file (once; thread-safe)."""
        with self._lock:
            if self.flush_started:
                return
            self.flush_started = True
            cuda_calls = not from_signal
            if from_signal:  # first, before anything that could block or get us killed
                self._write_status(reason, cuda_calls=False)
            try:
                if cuda_calls:
                    _steps.close_open()
                if self.recorder.running:
                    self._finish(sync=cuda_calls)
                self.clocks.close(cuda_calls)  # a window cut short
                if not self.window.saved:
                    self.window.saved = self.recorder.write_empty(
                        self.trace_path(), {"profplugWindow": self._window()})
            except Exception as exc:  # never hide the job's own failure behind ours
                sys.stderr.write(f"profplug: could not write the trace: {exc}\n")
            finally:
                self._write_status(reason, cuda_calls=cuda_calls)

    def _write_status(self, reason: str, cuda_calls: bool = True) -> None:
        trace = self.trace_path().relative_to(self.out) if self.window.saved else None
        statusfile.write(self.out, statusfile.record(
            self.end, reason, cuda_calls, trace=None if trace is None else str(trace),
            window=self._window(), timing=self.clocks.timing,
            untraced=self.clocks.untraced if self.plan.observe else None))
