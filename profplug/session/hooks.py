"""Post-import hooks (stdlib only): run a callback right after a named module is imported.

Lets the bootstrap patch Megatron-Core and start the session when the job imports them,
without importing torch or Megatron in processes that never use them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]
_callbacks: dict[str, list[Callback]] = {}


def _fire(name: str, module: ModuleType) -> None:
    for cb in _callbacks.pop(name, []):
        try:
            cb(module)
        except Exception as exc:  # a broken hook must not break the user's import
            print(f"profplug: hook for {name} failed: {exc!r}", file=sys.stderr)


class _Finder:
    """A meta-path finder that wraps the real loader's ``exec_module`` for watched names."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _callbacks:
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
        if exec_module is None:
            return spec

        def exec_and_fire(module: ModuleType) -> None:
            exec_module(module)
            _fire(fullname, module)

        try:
            loader.exec_module = exec_and_fire  # type: ignore[union-attr]
        except (AttributeError, TypeError):
            pass
        return spec


_finder = _Finder()


def when_imported(name: str, callback: Callback) -> None:
    """Call ``callback(module)`` once ``name`` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        _callbacks.setdefault(name, []).append(callback)
        _fire(name, module)
        return
    _callbacks.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
