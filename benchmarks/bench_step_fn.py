"""Cost of ``--step-fn`` per call, and of the script watch while it is installed.

    .venv/bin/python benchmarks/bench_step_fn.py [--n 200000]

Rows (ns per call, best of 5 rounds of ``--n`` calls; no profiler attached, no session):
- plain call: a one-line Python function;
- step function (wrapped): the same function as a ``--step-fn`` (each outermost call begins
  and ends a ``profplug.step``): the cost per step of every ``--step-fn``, the script's own
  functions included, once wrapped;
- nested step-function call: a call inside a step (counted, not a step);
- any call, script watch on: an unrelated Python call while ``profplug.scriptsteps`` waits for
  the script to define its function (``sys.settrace``, only the module-level frame traced):
  paid from the job's ``import torch`` to the ``def``, during imports and definitions only;
- any call, setprofile watch (not used): the alternative that waits for the first call of the
  function with ``sys.setprofile`` (a Python callback on every call and return, C calls too),
  paid until the first call of the step function, i.e. through the job's whole set-up;
- on 3.12+, any call, sys.monitoring PY_START/PY_RETURN on the function only (not used):
  per call of the step function itself.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import profplug.steps as steps
from profplug import autosteps, scriptsteps


def f(x: int) -> int:
    return x + 1


def _per_call_ns(fn: Callable[[int], Any], n: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for i in range(n):
            fn(i)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def _with_script_watch(n: int) -> float:
    """An unrelated call while the script watch waits (a name that is never defined)."""
    main = sys.modules["__main__"]
    scriptsteps.when_defined(lambda: hasattr(main, "never_defined_step_fn"))
    try:
        return _per_call_ns(f, n)
    finally:
        scriptsteps.stop()


def _with_setprofile(n: int) -> float:
    target = f.__code__.replace(co_name="other")  # never matches: waiting for the first call

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is target:
            pass

    sys.setprofile(prof)
    try:
        return _per_call_ns(f, n)
    finally:
        sys.setprofile(None)


def _with_monitoring(n: int) -> float | None:
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return None
    tool = next((i for i in (4, 3) if mon.get_tool(i) is None), None)
    if tool is None:
        return None
    mon.use_tool_id(tool, "bench")
    ev = mon.events
    mon.register_callback(tool, ev.PY_START, lambda code, off: None)
    mon.register_callback(tool, ev.PY_RETURN, lambda code, off, ret: None)
    mon.set_local_events(tool, f.__code__, ev.PY_START | ev.PY_RETURN)
    try:
        return _per_call_ns(f, n)
    finally:
        mon.set_local_events(tool, f.__code__, 0)
        mon.free_tool_id(tool)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    n = ap.parse_args().n
    plain = _per_call_ns(f, n)
    target = autosteps.Target("bench:f", steps.STEP_FN)
    wrapped = autosteps.step_wrapper(f, target)
    step_ns = _per_call_ns(wrapped, n)
    nested: list[float] = []  # inside one step: the calls are counted, not steps
    outer = autosteps.step_wrapper(lambda k: nested.append(_per_call_ns(wrapped, k)),
                                   autosteps.Target("bench:outer", steps.STEP_FN))
    outer(n)
    steps._reset()
    rows = [("plain call", plain), ("step function (wrapped), per step", step_ns),
            ("nested step-function call", nested[0]),
            ("any call, script watch on (sys.settrace)", _with_script_watch(n)),
            ("any call, setprofile watch (not used)", _with_setprofile(n))]
    mon = _with_monitoring(n)
    if mon is not None:
        rows.append(("step fn, sys.monitoring start/return (not used)", mon))
    print(f"python {sys.version.split()[0]}, {n:,} calls, best of 5 rounds")
    print(f"{'case':<50} {'ns/call':>9} {'+ns vs plain':>13}")
    for name, ns in rows:
        print(f"{name:<50} {ns:>9.0f} {ns - plain:>+13.0f}")


if __name__ == "__main__":
    main()
