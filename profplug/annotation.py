"""``profplug.annotate(name, **payload)``: one range API for Nsight Systems and Kineto.

A range is an NVTX push/pop in the ``profplug`` domain (prebuilt event attributes, so no
string is built per call) and, only while a torch.profiler session records, also a
``record_function``-style range of the same name (``user_annotation`` in Kineto traces).

Cost model (see ``benchmarks/bench_annotate.py``): ``annotate(name)`` returns a cached
object per name whose *class* holds ``__enter__``/``__exit__``. The with-statement looks
those up on the class, so profplug swaps them per mode instead of testing a flag per call:

- no NVTX tool attached and no profiler recording: C-level no-ops (the with-statement floor);
- NVTX tool attached (nsys): ``__enter__`` is ``functools.partial(domain.push_range, attrs)``;
- profiler recording: Python methods that also open a USER_SCOPE record function.

The mode follows torch's own profiler start/stop hooks
(``torch.autograd.profiler._run_on_profiler_start/_stop``); when a torch build lacks them,
every range checks ``torch.autograd._profiler_enabled()`` per call instead.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, ParamSpec, TypeVar

import torch
import torch.autograd.profiler as _tprof

from profplug.analyzers.core import ranges

P = ParamSpec("P")
R = TypeVar("R")

_NOOP = "".format  # a C callable that takes any arguments and returns "" (falsy)
_CACHE_MAX = 4096

try:
    import nvtx as _nvtx

    _DOMAIN: Any = _nvtx.get_domain(ranges.DOMAIN)
    NVTX_TOOL_ATTACHED: bool = type(_DOMAIN).__name__ == "Domain"
except ImportError:  # nvtx is a dependency, but never fail a user's job over it
    _nvtx = None
    _DOMAIN = None
    NVTX_TOOL_ATTACHED = False

try:
    _rf_enter = torch._C._autograd._record_function_with_args_enter
    _rf_exit = torch._C._autograd._record_function_with_args_exit
except AttributeError:  # older torch: the dispatcher ops (slower, same USER_SCOPE ranges)
    def _rf_enter(name: str, *args: Any) -> Any:
        return torch.ops.profiler._record_function_enter_new(name, None)

    def _rf_exit(handle: Any) -> None:
        torch.ops.profiler._record_function_exit._RecordFunction(handle)

_tls = threading.local()
_lock = threading.Lock()
_cache: dict[Any, Range] = {}
_classes: weakref.WeakSet[type[Range]] = weakref.WeakSet()
_profiling = False
_hooked = False


class Range:
    """A named profplug range: use as ``with annotate(name):`` or ``@annotate(name)``.

    Instances are cached singletons; ``__enter__``/``__exit__`` are set on the per-name
    subclass by :func:`_install` (never call them with ``as``: the value is meaningless).
    """

    __slots__ = ()
    name: str = ""
    _attrs: Any = None
    # the current mode's pair, set on each per-name subclass by _install
    __enter__: ClassVar[Callable[[Range], object]]
    __exit__: ClassVar[Callable[..., object]]

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with self:
                return fn(*args, **kwargs)

        return wrapper

    def __repr__(self) -> str:
        return f"<profplug range {self.name!r}>"

    # Mode methods (assigned to subclasses by _install).
    def _exit_nvtx(self, *exc: object) -> None:
        _DOMAIN.pop_range()

    def _enter_prof(self) -> None:
        if NVTX_TOOL_ATTACHED:
            _DOMAIN.push_range(self._attrs)
        stack = _tls.__dict__.setdefault("stack", [])
        stack.append((self, _rf_enter(self.name)))

    def _exit_prof(self, *exc: object) -> None:
        stack = _tls.__dict__.get("stack")
        if stack and stack[-1][0] is self:
            _rf_exit(stack.pop()[1])
        if NVTX_TOOL_ATTACHED:
            _DOMAIN.pop_range()

    def _enter_check(self) -> None:
        if torch.autograd._profiler_enabled():
            self._enter_prof()
        elif NVTX_TOOL_ATTACHED:
            _DOMAIN.push_range(self._attrs)

    def _exit_check(self, *exc: object) -> None:
        self._exit_prof(*exc)


def _install(cls: type[Range]) -> None:
    """Give ``cls`` the enter/exit pair of the current mode."""
    if not _hooked:
        cls.__enter__, cls.__exit__ = Range._enter_check, Range._exit_check
    elif _profiling:
        cls.__enter__, cls.__exit__ = Range._enter_prof, Range._exit_prof
    elif NVTX_TOOL_ATTACHED:
        cls.__enter__ = functools.partial(_DOMAIN.push_range, cls._attrs)
        cls.__exit__ = Range._exit_nvtx
    else:
        cls.__enter__, cls.__exit__ = _NOOP, _NOOP


def _set_profiling(on: bool) -> None:
    global _profiling
    with _lock:
        _profiling = on
        for cls in list(_classes):
            _install(cls)
    if not on:
        _tls.__dict__.pop("stack", None)


def _hook_torch_profiler() -> None:
    """Follow torch.profiler start/stop by wrapping torch's own module-level hooks."""
    global _hooked
    start = getattr(_tprof, "_run_on_profiler_start", None)
    stop = getattr(_tprof, "_run_on_profiler_stop", None)
    if start is None or stop is None:
        return
    if getattr(start, "__profplug__", False):  # this module was imported again
        _hooked = True
        return

    @functools.wraps(start)
    def on_start() -> None:
        start()
        _set_profiling(True)

    @functools.wraps(stop)
    def on_stop() -> None:
        stop()
        _set_profiling(False)

    on_start.__profplug__ = True  # type: ignore[attr-defined]  # a marker on a function
    on_stop.__profplug__ = True  # type: ignore[attr-defined]  # a marker on a function
    _tprof._run_on_profiler_start = on_start
    _tprof._run_on_profiler_stop = on_stop
    _hooked = True


def _new_range(name: str, payload: dict[str, Any], key: Any) -> Range:
    attrs = None
    if NVTX_TOOL_ATTACHED:
        value = next((v for v in payload.values() if isinstance(v, (int, float))), None)
        attrs = _DOMAIN.get_event_attributes(message=name, payload=value)
    cls = type("Range", (Range,), {"__slots__": (), "name": name, "_attrs": attrs})
    with _lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _install(cls)
        _classes.add(cls)
        obj = _cache.setdefault(key, cls())
    return obj


def annotate(name: str, **payload: int | float) -> Range:
    """The range ``name``: a context manager and a decorator (cached per name and payload).

    ``payload``: numbers for the NVTX event (NVTX carries one numeric payload: the first
    number given, e.g. ``bytes=``); Kineto ranges carry only the name.
    """
    key = (name, *payload.items()) if payload else name
    r = _cache.get(key)
    if r is None:
        r = _new_range(name, payload, key)
    return r


def mark(text: str) -> None:
    """An instant NVTX mark in the profplug domain (e.g. ``ranges.rank_mark(rank)``)."""
    if NVTX_TOOL_ATTACHED:
        _DOMAIN.mark(message=text)


def profiling() -> bool:
    """Whether a torch.profiler session records right now (as profplug tracks it)."""
    return _profiling if _hooked else bool(torch.autograd._profiler_enabled())


_hook_torch_profiler()
_profiling = bool(torch.autograd._profiler_enabled())
