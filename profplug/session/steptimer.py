"""Per-step times of a rank's window at near-zero cost (``PROFPLUG_STEP_TIMING``).

At each step boundary inside the window the timer takes ``time.perf_counter_ns()`` into a
preallocated list and, in ``events`` mode when the job uses CUDA, records a preallocated
CUDA event (``enable_timing=True``) on the current stream: no host synchronization and no
allocation in the hot loop (the events are created, and recorded once, before the window
opens, so no ``cudaEventCreate`` happens inside it). The boundaries are the begin of every
window step and the end of the last one: step k lasts from its begin to the next step's
begin (its period, the pipeline's throughput), the last step from its begin to its end.

A mark is kept to a few C calls (``torch.cuda.current_stream()`` builds a Python ``Stream``
object, ~4 us, and ``Event.record()`` looks it up again): the ``Stream`` of the current
stream is resolved once, at window start, with its raw handle; each mark reads the raw
handle of the current stream (``torch._C._cuda_getCurrentRawStream``, one C call, no
object) and resolves the ``Stream`` again only when the handle changed (the job switched
streams); then it calls the event's C-level ``record`` (bound once per event) with the
cached ``Stream``. The device is the one current at window start (the events live there).

After the window (its own synchronize has drained the device) :meth:`StepTimer.result`
reads ``elapsed_time`` between consecutive events (ms -> us). Without CUDA, or in ``host``
mode, the step time is the host's wall time. The window is the session's (``--skip`` /
``--steps``, aligned across ranks); :mod:`profplug.session.core` calls :meth:`mark`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

CLOCK_EVENT = "cuda_event"
CLOCK_HOST = "host"


def _cuda_in_use() -> bool:
    """CUDA is available and the job has initialized it (a CPU job stays CPU-only)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _new_event() -> Any:
    return torch.cuda.Event(enable_timing=True)


def _device() -> int:
    return torch.cuda.current_device()


def _stream(device: int) -> Any:
    """The current stream of ``device`` as a ``torch.cuda.Stream`` (the slow look-up)."""
    return torch.cuda.current_stream(device)


def _raw_stream_fn() -> Callable[[int], Any]:
    """A cheap key of the current stream of a device: its raw ``cudaStream_t`` (one C call,
    torch's CUDA builds since 2.0: Inductor's generated code uses it), else the
    ``(stream_id, device_index, device_type)`` tuple, else the ``Stream`` itself."""
    fn = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fn is None:
        fn = getattr(torch._C, "_cuda_getCurrentStream", None)
    return fn if fn is not None else _stream


def _c_record(ev: Any) -> Callable[[Any], None]:
    """``ev``'s C-level record, bound (``torch.cuda.Event.record`` is a Python layer that
    looks the current stream up when given none); ``ev.record`` for anything else."""
    base = getattr(torch._C, "_CudaEventBase", None)
    rec = getattr(base, "record", None) if base is not None else None
    bound: Callable[[Any], None]  # torch declares no types for either
    if base is not None and rec is not None and isinstance(ev, base):
        bound = rec.__get__(ev)
    else:
        bound = ev.record
    return bound


class StepTimer:
    """``n`` steps: ``n + 1`` boundaries, marked in order by :meth:`mark`."""

    __slots__ = ("_clock", "_dev", "_key", "_raw", "_records", "_stream", "clock", "events",
                 "host", "marks", "mode", "n", "resolves")

    def __init__(self, n: int, mode: str = "events") -> None:
        if n < 1:
            raise ValueError("a step timer needs at least one step")
        self.n = n
        self.mode = mode
        self.host = [0] * (n + 1)
        self.marks = 0
        self._clock = time.perf_counter_ns
        self.events: list[Any] | None = None
        self._records: list[Callable[[Any], None]] | None = None
        self._raw: Callable[[int], Any] = _stream
        self._dev = 0
        self._key: Any = None
        self._stream: Any = None
        self.resolves = 0  # Stream look-ups (1 at window start; 1 more per stream switch)
        self.clock = CLOCK_HOST
        if mode == "events" and _cuda_in_use():
            self._dev = _device()
            self._raw = _raw_stream_fn()
            self._resolve(self._raw(self._dev))
            self.events = [_new_event() for _ in range(n + 1)]
            self._records = [_c_record(ev) for ev in self.events]
            for rec in self._records:
                rec(self._stream)  # creates the CUDA event now, outside the window
            self.clock = CLOCK_EVENT

    def _resolve(self, key: Any) -> None:
        """The current stream changed (or the window starts): look its ``Stream`` up."""
        self._stream = _stream(self._dev)
        self._key = key
        self.resolves += 1

    def mark(self) -> None:
        """The next boundary: host clock, then a CUDA event on the current stream."""
        k = self.marks
        if k > self.n:
            return
        self.host[k] = self._clock()
        records = self._records
        if records is not None:
            key = self._raw(self._dev)
            if key != self._key:
                self._resolve(key)
            records[k](self._stream)
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
            "stream_switches": max(self.resolves - 1, 0),
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
