"""Post-import hooks (stdlib only): run a callback right after a named module is imported.

Lets the bootstrap patch Megatron-Core and start the session when the job imports them,
without importing torch or Megatron in processes that never use them; ``autosteps`` (behind
``profplug.patch`` too) waits here for a step function's module. Below both: the runtime
modules never import ``profplug.session``.

A callback runs once its module is *whole* (its body has finished) and torch is not
half-imported:
- a module found in ``sys.modules`` while its body still runs (the session starts inside that
  module's own ``import torch``) waits until its body ends;
- a module imported while torch imports itself (``torch.distributed``) waits until torch has
  finished: profplug's callbacks import torch, and importing torch's submodules in another
  order than torch's own ``__init__`` does breaks the job's ``import torch`` ("partially
  initialized module 'torch'").
A callback runs right after its module's body otherwise (before the module that imported it
can bind its names), so a package above it may still be importing. The end of every watched
module's body, and of torch's, runs the callbacks that have become ready.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]
_callbacks: dict[str, list[Callback]] = {}
_executed: set[str] = set()  # modules whose body has run (their import may not have returned)
ALWAYS_WAIT_FOR = ("torch",)  # callbacks import it: never run one while it is half-imported


def _fire(name: str, module: ModuleType) -> None:
    for cb in _callbacks.pop(name, []):
        try:
            cb(module)
        except Exception as exc:  # a broken hook must not break the user's import
            sys.stderr.write(f"profplug: hook for {name} failed: {exc!r}\n")


def _initializing(name: str) -> bool:
    """Whether module ``name`` is in ``sys.modules`` with its body still running."""
    module = sys.modules.get(name)
    if module is None or name in _executed:
        return False
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def blocked(name: str) -> bool:
    """Whether ``name`` or torch is still being imported."""
    return any(_initializing(n) for n in (*ALWAYS_WAIT_FOR, name))


def _drain() -> None:
    """Run the callbacks of every imported module that is whole now."""
    for name in list(_callbacks):
        module = sys.modules.get(name)
        if module is not None and not blocked(name):
            _fire(name, module)


class _Finder:
    """A meta-path finder that wraps the real loader's ``exec_module`` for watched names."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _callbacks and fullname not in ALWAYS_WAIT_FOR:
            return None
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if loader is None or exec_module is None:
            return spec

        def exec_and_fire(module: ModuleType) -> None:
            exec_module(module)
            _executed.add(fullname)
            _drain()

        try:
            loader.exec_module = exec_and_fire
        except (AttributeError, TypeError):
            pass
        return spec


_finder = _Finder()


def when_imported(name: str, callback: Callback) -> None:
    """Call ``callback(module)`` once ``name`` is imported and whole (now, if it is)."""
    _callbacks.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:  # also to learn when a blocking module ends
        sys.meta_path.insert(0, _finder)
    module = sys.modules.get(name)
    if module is not None and not blocked(name):
        _fire(name, module)
