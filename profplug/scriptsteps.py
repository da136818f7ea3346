"""Step functions of the script itself: ``--step-fn __main__:FUNC``, ``--step-fn
path/to/script.py:FUNC`` (the file that ``python`` or torchrun runs) and ``--step-fn
pkg.mod:FUNC`` when ``python -m pkg.mod`` runs it (stdlib only).

The script's functions do not exist before its body defines them, and no import hook ends
before the loop that calls them (often under ``if __name__ == "__main__":``). So the
module-level code of the script is watched line by line from the moment profplug asks (the
job's first ``import torch``, which starts the session) until every requested name is defined:
after each module-level line, :func:`when_defined`'s callbacks look the name up in
``__main__`` and wrap the function there, as for any ``--step-fn`` (the loop looks the name up
at each call, so it calls the wrapper). Then the watch is removed.

Mechanism: ``sys.settrace`` with a global trace function that traces only the script's
module-level frame (``f_trace`` set on that frame when it is already running, as ``pdb``
does). While it is installed every Python call of the process costs more (+2.2-2.4 us on the
2-core dev CPU, Python 3.11: ``benchmarks/bench_step_fn.py``): between the job's ``import
torch`` and the ``def`` of the step function, i.e. during imports and definitions, never in
the steps. After that the cost per step is the step wrapper's (the same as a step function in
a module). Waiting for the function's first call with ``sys.setprofile`` instead costs +1.5-1.7
us per call, but through the job's whole set-up. A trace function already installed (a
debugger, coverage) is chained and put back.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any, Literal

from profplug.config import is_step_fn_path as is_path

Check = Callable[[], bool]  # looks the name up, wraps it; True once done

_pending: list[Check] = []
_state: dict[str, Any] = {}  # while installed: "prev" (global trace fn), "frame", "globals"


def _same_file(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def main_module() -> ModuleType | None:
    return sys.modules.get("__main__")


def names_the_script(module: str) -> bool:
    """Whether ``module`` (a name or a path) is the script this process runs: ``__main__``,
    the file of ``python FILE`` / torchrun FILE, or the module of ``python -m MODULE``."""
    if module == "__main__":
        return True
    main = main_module()
    if main is None:
        return False
    if is_path(module):
        script = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else None)
        return _same_file(module, script)
    spec = getattr(main, "__spec__", None)
    return spec is not None and getattr(spec, "name", None) == module


def module_name_for(path: str) -> str | None:
    """The module name a file path is imported under (from ``sys.path``), or None."""
    real = os.path.realpath(path)
    if not real.endswith(".py"):
        return None
    for entry in sys.path:
        root = os.path.realpath(entry or os.curdir)
        rel = os.path.relpath(real, root)
        if rel.startswith(os.pardir) or os.path.isabs(rel):
            continue
        parts = rel[:-3].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            return ".".join(parts)
    return None


def _main_frame(g: dict[str, Any]) -> FrameType | None:
    """The script's module-level frame on the main thread's stack, if it is running."""
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_globals is g and frame.f_code.co_name == "<module>":
            return frame
        frame = frame.f_back
    return None


def _check() -> None:
    _pending[:] = [c for c in _pending if not c()]
    if not _pending:
        _uninstall()


def _local(prev_local: Any) -> Any:
    """The trace function of the script's module-level frame (chaining ``prev_local``)."""
    def trace(frame: FrameType, event: TraceEvent, arg: Any) -> Any:
        nonlocal prev_local
        if prev_local is not None:
            prev_local = prev_local(frame, event, arg)
        if event in ("line", "return") and _pending:
            _check()
            if event == "return" and _pending:  # the script's body ended: nothing more comes
                _uninstall()
        return trace if _pending else prev_local
    return trace


# what sys.settrace passes a trace function (typeshed's _typeshed.TraceFunction)
TraceEvent = Literal["call", "line", "return", "exception", "opcode"]


def _install(g: dict[str, Any]) -> str | None:
    if _state:
        return None
    if threading.current_thread() is not threading.main_thread():
        return "the script's functions are watched from the main thread only"
    prev = sys.gettrace()

    def global_trace(frame: FrameType, event: TraceEvent, arg: Any) -> Any:
        local = prev(frame, event, arg) if prev is not None else None
        if event == "call" and frame.f_globals is g and frame.f_code.co_name == "<module>":
            _state["frame"] = frame
            return _local(local)
        return local

    frame = _main_frame(g)
    _state.update(prev=prev, globals=g, frame=frame)
    if frame is not None:  # running: trace its next lines (pdb.set_trace does the same)
        frame.f_trace = _local(frame.f_trace)
        frame.f_trace_lines = True
    sys.settrace(global_trace)
    return None


def _uninstall() -> None:
    if not _state:
        return
    sys.settrace(_state.get("prev"))
    _state.clear()


def when_defined(check: Check) -> str | None:
    """Run ``check`` now and, until it returns True, after each module-level line of the
    script; a reason when that cannot be done, else None."""
    if check():
        return None
    main = main_module()
    if main is None:
        return "no __main__ module"
    _pending.append(check)
    why = _install(main.__dict__)
    if why is not None:
        _pending.remove(check)
    return why


def stop() -> None:
    """Forget every pending check and remove the watch (tests, unpatch)."""
    _pending.clear()
    _uninstall()
