"""Per-step times of a rank's window at near-zero cost (``PROFPLUG_STEP_TIMING``).

At each step boundary inside the window the timer takes ``time.perf_counter_ns()`` into a
preallocated list and, in ``events`` mode when the job uses CUDA, records a preallocated
CUDA event (``enable_timing=True``) on the current stream: no host synchronization and no
allocation in the hot loop (the events are created, and recorded once, before the window
opens, so no ``cudaEventCreate`` happens inside it). The boundaries are the begin of every
window step and the end of the last one: step k lasts from its begin to the next step's
begin (its period, the pipeline's throughput), the last step from its begin to its end.

After the window (its own synchronize has drained the device) :meth:`StepTimer.result`
reads ``elapsed_time`` between consecutive events (ms -> us). Without CUDA, or in ``host``
mode, the step time is the host's wall time. The window is the session's (``--skip`` /
``--steps``, aligned across ranks); :mod:`profplug.session.core` calls :meth:`mark`.
"""

from __future__ import annotations

import time
from typing import Any

import torch

CLOCK_EVENT = "cuda_event"
CLOCK_HOST = "host"


def _cuda_in_use() -> bool:
    """CUDA is available and the job has initialized it (a CPU job stays CPU-only)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


class StepTimer:
    """``n`` steps: ``n + 1`` boundaries, marked in order by :meth:`mark`."""

    __slots__ = ("_clock", "clock", "events", "host", "marks", "mode", "n")

    def __init__(self, n: int, mode: str = "events") -> None:
        if n < 1:
            raise ValueError("a step timer needs at least one step")
        self.n = n
        self.mode = mode
        self.host = [0] * (n + 1)
        self.marks = 0
        self._clock = time.perf_counter_ns
        self.events: list[Any] | None = None
        self.clock = CLOCK_HOST
        if mode == "events" and _cuda_in_use():
            stream = torch.cuda.current_stream()
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            for ev in self.events:
                ev.record(stream)  # creates the CUDA event now, outside the window
            self.clock = CLOCK_EVENT

    def mark(self) -> None:
        """The next boundary: host clock, then a CUDA event on the current stream."""
        k = self.marks
        if k > self.n:
            return
        self.host[k] = self._clock()
        if self.events is not None:
            self.events[k].record()
        self.marks = k + 1

    @property
    def complete(self) -> bool:
        return self.marks == self.n + 1

    def result(self, cuda_calls: bool = True) -> dict[str, Any]:
        """The status file's ``timing`` object. Step times in us; ``steps`` complete steps
        (a window cut short has fewer). ``cuda_calls=False`` (from a signal handler): the
        events are not read, and the step time is the host's."""
        steps = max(self.marks - 1, 0)
        h = self.host
        host_us = [round((h[i + 1] - h[i]) / 1000.0, 3) for i in range(steps)]
        out: dict[str, Any] = {
            "mode": self.mode, "clock": CLOCK_HOST, "steps": steps,
            "requested_steps": self.n, "complete": self.complete,
            "step_us": host_us, "host_step_us": host_us, "error": None,
        }
        if self.events is None or not steps:
            return out
        if not cuda_calls:
            out["error"] = "CUDA events not read (the rank was ending on a signal)"
            return out
        try:
            from profplug.p2p import original_synchronize

            original_synchronize()()  # events of every stream the job recorded on
            ev = self.events
            out["step_us"] = [round(ev[i].elapsed_time(ev[i + 1]) * 1000.0, 3)
                              for i in range(steps)]
            out["clock"] = CLOCK_EVENT
        except Exception as exc:  # never fail the job over its timing
            out["error"] = f"CUDA events unreadable: {exc}"
        return out
