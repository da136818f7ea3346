"""``profplug.step()``: pipeline step boundaries (a ``profplug.step`` range per step).

Both forms work and may not be mixed within one loop::

    for tok in range(n):
        with profplug.step():      # the range covers the with-body
            ...
    for tok in range(n):
        profplug.step()            # the range runs until the next call (or the end)
        ...

Each call advances profplug's own profiling window (``PROFPLUG_SKIP``/``PROFPLUG_STEPS``)
and calls ``prof.step()`` on torch.profiler sessions registered with :func:`attach`.
The step range is an NVTX start/end range (payload: the step index) so it may span
other ranges; while torch.profiler records it is also a record function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import profplug.annotation as _ann
from profplug import ranges

Listener = Callable[[int], None]

_count = 0
_open: Step | None = None
_on_begin: list[Listener] = []
_on_end: list[Listener] = []
_attached: list[Any] = []


def _no_activity() -> None:
    return None


# Called by profplug's p2p functions and synchronize wrapper on every call; a session sets
# it to start a whole-run recording at the first call (then resets it to a no-op).
on_activity: Callable[[], None] = _no_activity


class Step:
    """One step; closing it (``__exit__``, the next ``step()`` or :func:`close_open`) ends
    its range."""

    __slots__ = ("_handle", "_nvtx_id", "index")

    def __init__(self, index: int) -> None:
        self.index = index
        self._nvtx_id: int | None = None
        self._handle: Any = None
        if _ann.NVTX_TOOL_ATTACHED:
            attrs = _ann._DOMAIN.get_event_attributes(message=ranges.STEP, payload=index)
            self._nvtx_id = _ann._DOMAIN.start_range(attrs)
        if _ann.profiling():
            self._handle = _ann._rf_enter(ranges.STEP)

    def close(self) -> None:
        global _open
        index = self.index
        if index < 0:
            return
        self.index = -1
        if _open is self:
            _open = None
        if self._handle is not None:
            _ann._rf_exit(self._handle)
            self._handle = None
        if self._nvtx_id is not None:
            _ann._DOMAIN.end_range(self._nvtx_id)
            self._nvtx_id = None
        for cb in list(_on_end):
            cb(index)

    def __enter__(self) -> Step:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def step() -> Step:
    """Begin the next step (ending the previous one); returns it for ``with``."""
    global _count, _open
    if _open is not None:
        _open.close()
    index = _count
    _count += 1
    for cb in list(_on_begin):
        cb(index)
    for prof in list(_attached):
        prof.step()
    _open = Step(index)
    return _open


def close_open() -> None:
    """End the step range left open by a bare ``step()`` call (at exit, before a flush)."""
    if _open is not None:
        _open.close()


def count() -> int:
    """How many steps have begun in this process."""
    return _count


def attach(prof: Any) -> None:
    """Call ``prof.step()`` (a torch.profiler.profile) at every ``profplug.step()``."""
    if prof not in _attached:
        _attached.append(prof)


def detach(prof: Any) -> None:
    if prof in _attached:
        _attached.remove(prof)


def add_listener(on_begin: Listener | None = None, on_end: Listener | None = None) -> None:
    """Session hooks: ``on_begin(i)`` before step i's range opens, ``on_end(i)`` after it closes."""
    if on_begin is not None:
        _on_begin.append(on_begin)
    if on_end is not None:
        _on_end.append(on_end)


def remove_listener(on_begin: Listener | None = None, on_end: Listener | None = None) -> None:
    if on_begin in _on_begin:
        _on_begin.remove(on_begin)
    if on_end in _on_end:
        _on_end.remove(on_end)
