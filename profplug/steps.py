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
other ranges; while torch.profiler records it is also a record function, enclosed in a
``ProfilerStep#<index>`` record function (torch.profiler's and HTA's name for a step;
left out while a torch.profiler session is attached, since that one names its own steps).

Steps come from three sources, in rising priority: a library profplug knows
(``LIBRARY``: Megatron-Core's ``run_one_forward_step``, transformers'
``pipeline_parallel_naive_forward``; the source is named after the library),
``profplug.step()`` in the job (``MANUAL``) and functions named with ``profplug run
--step-fn`` (``STEP_FN``), see :mod:`profplug.autosteps`. The highest source seen so far is in control: steps begun by a
lower one are ignored (a no-op step), and the first step of a higher one restarts the count
at 0 and tells the session (``on_switch``) to discard any window the lower one opened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profplug import annotation
from profplug.analyzers.core import ranges

Listener = Callable[[int], None]
SwitchListener = Callable[[str, str, int], None]  # (old source, new source, steps dropped)

LIBRARY, MANUAL, STEP_FN = 0, 1, 2
SOURCES = ("library", "manual", "step_fn")  # LIBRARY: named after the library instead

_count = 0
_level = -1  # the source in control (index into SOURCES); -1 before the first step
_library = SOURCES[LIBRARY]  # the library whose steps are counted at the LIBRARY level
_open: Step | None = None
# Listener tuples are replaced, never mutated: a step iterates them without a copy.
_on_begin: tuple[Listener, ...] = ()
_on_end: tuple[Listener, ...] = ()
_on_switch: tuple[SwitchListener, ...] = ()
_on_activity: tuple[Callable[[], None], ...] = ()
_attached: list[Any] = []


def on_activity() -> None:
    """A p2p or synchronize call through profplug (its wrappers call this on every call):
    the activity listeners run (a rank's session starts a whole-run recording at the first
    one, then stops listening)."""
    for cb in _on_activity:
        cb()


class Step:
    """One step; closing it (``__exit__``, the next ``step()`` or :func:`close_open`) ends
    its range."""

    __slots__ = ("_handles", "_nvtx_id", "index")

    def __init__(self, index: int) -> None:
        self.index = index
        self._nvtx_id: int | None = None
        self._handles: tuple[Any, ...] = ()
        if annotation.NVTX_TOOL_ATTACHED:
            attrs = annotation._DOMAIN.get_event_attributes(message=ranges.STEP, payload=index)
            self._nvtx_id = annotation._DOMAIN.start_range(attrs)
        if annotation.profiling():
            outer = () if _attached else (annotation._rf_enter(ranges.profiler_step(index)),)
            self._handles = (*outer, annotation._rf_enter(ranges.STEP))

    def close(self) -> None:
        global _open
        index = self.index
        if index < 0:
            return
        self.index = -1
        if _open is self:
            _open = None
        if self._handles:
            for handle in reversed(self._handles):
                annotation._rf_exit(handle)
            self._handles = ()
        if self._nvtx_id is not None:
            annotation._DOMAIN.end_range(self._nvtx_id)
            self._nvtx_id = None
        for cb in _on_end:
            cb(index)

    def __enter__(self) -> Step:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ignored() -> Step:
    s = Step.__new__(Step)
    s.index, s._nvtx_id, s._handles = -1, None, ()
    return s


IGNORED = _ignored()  # what a step of a source not in control returns (closing it: no-op)


def step() -> Step:
    """Begin the next step (ending the previous one); returns it for ``with``."""
    return begin(MANUAL)


def begin(level: int, library: str | None = None) -> Step:
    """Begin the next step on behalf of source ``level`` (``LIBRARY``/``MANUAL``/``STEP_FN``;
    ``library``: the library's name, at the ``LIBRARY`` level)."""
    global _count, _open, _library
    if library is not None and level == LIBRARY and _level <= LIBRARY:
        _library = library
    if level != _level:
        if level < _level:
            return IGNORED
        _take_control(level)
    if _open is not None:
        _open.close()
    index = _count
    _count += 1
    for cb in _on_begin:
        cb(index)
    if _attached:
        for prof in list(_attached):
            prof.step()
    _open = Step(index)
    return _open


def _take_control(level: int) -> None:
    global _count, _level
    previous, dropped = _level, _count
    _level = level
    if previous < 0:
        return
    close_open()
    _count = 0
    for cb in _on_switch:
        cb(_name(previous), _name(level), dropped)


def _name(level: int) -> str:
    return _library if level == LIBRARY else SOURCES[level]


def source() -> str | None:
    """The source in control (the library's name, e.g. ``"megatron"``; ``"manual"``,
    ``"step_fn"``), None before any."""
    return _name(_level) if _level >= 0 else None


def close_open() -> None:
    """End the step range left open by a bare ``step()`` call (at exit, before a flush)."""
    if _open is not None:
        _open.close()


def count() -> int:
    """How many steps the source in control has begun in this process."""
    return _count


def attach(prof: Any) -> None:
    """Call ``prof.step()`` (a torch.profiler.profile) at every ``profplug.step()``."""
    if prof not in _attached:
        _attached.append(prof)


def detach(prof: Any) -> None:
    if prof in _attached:
        _attached.remove(prof)


def add_listener(on_begin: Listener | None = None, on_end: Listener | None = None,
                 on_switch: SwitchListener | None = None,
                 on_activity: Callable[[], None] | None = None) -> None:
    """Session hooks: ``on_begin(i)`` before step i's range opens, ``on_end(i)`` after it
    closes, ``on_switch(old, new, dropped)`` when a higher source takes control,
    ``on_activity()`` at each p2p or synchronize call (:func:`on_activity`)."""
    global _on_begin, _on_end, _on_switch, _on_activity
    if on_begin is not None:
        _on_begin = (*_on_begin, on_begin)
    if on_end is not None:
        _on_end = (*_on_end, on_end)
    if on_switch is not None:
        _on_switch = (*_on_switch, on_switch)
    if on_activity is not None:
        _on_activity = (*_on_activity, on_activity)


def remove_listener(on_begin: Listener | None = None, on_end: Listener | None = None,
                    on_switch: SwitchListener | None = None,
                    on_activity: Callable[[], None] | None = None) -> None:
    global _on_begin, _on_end, _on_switch, _on_activity
    _on_begin = tuple(cb for cb in _on_begin if cb != on_begin)
    _on_end = tuple(cb for cb in _on_end if cb != on_end)
    _on_switch = tuple(cb for cb in _on_switch if cb != on_switch)
    _on_activity = tuple(cb for cb in _on_activity if cb != on_activity)


def _reset() -> None:
    """Back to the state of a fresh process (tests)."""
    global _count, _level, _library
    close_open()
    _count, _level, _library = 0, -1, SOURCES[LIBRARY]
