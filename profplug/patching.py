"""``profplug.patch()`` / ``profplug.unpatch()``: Megatron-Core p2p and ``torch.cuda.synchronize``.

- ``megatron``: replaces ``send_to_next_pipeline_rank``, ``recv_from_prev_pipeline_rank_`` and
  ``broadcast_from_last_pipeline_stage`` in ``megatron.core.inference.communication_utils``
  and in every loaded ``megatron.*`` module that imported them by name, with wrappers that
  call :mod:`profplug.p2p` (policy from ``PROFPLUG_SYNC``, default ``device`` = Megatron's);
  and each outermost ``run_one_forward_step`` call on Megatron-Core's inference wrappers is
  one step (:mod:`profplug.autosteps`; a job's own ``profplug.step()`` takes precedence).
  The tensor ``broadcast_from_last_pipeline_stage`` returns (the logits or tokens every stage
  gets) goes to ``profplug.digest`` (a no-op unless ``profplug ab`` turned digests on).
- ``synchronize``: wraps ``torch.cuda.synchronize`` so every call is the range
  ``ranges.synchronize_range(file, line, function)`` of its caller.

- ``step_fns``: ``MODULE:QUALNAME`` functions whose outermost calls are steps.

All are idempotent and reversible: originals are kept and restored where they were.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from profplug.analyzers.core import ranges
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.names import FUNCTIONS, MEGATRON_MODULE, MEGATRON_WRAPPER_MODULE

__all__ = ["FUNCTIONS", "MEGATRON_MODULE", "MEGATRON_WRAPPER_MODULE"]  # their old home

# (module, attribute, original) for every name profplug replaced.
_replaced: list[tuple[ModuleType, str, Any]] = []
_originals: dict[str, Callable[..., Any]] = {}
_wrappers: dict[str, Callable[..., Any]] = {}
_sync_original: Callable[..., Any] | None = None
BROADCAST = "broadcast_from_last_pipeline_stage"


class MegatronNotFoundError(ProfplugError, ImportError):
    """Megatron-Core cannot be imported, so there is nothing to patch."""


def _wrap_p2p(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    from profplug import p2p

    ours = getattr(p2p, name)

    if name == BROADCAST:
        from profplug.digests import digest

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = ours(*args, **kwargs)
            digest(out)  # what every stage got: the step's output
            return out
    else:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return ours(*args, **kwargs)

    wrapper.__profplug__ = True  # type: ignore[attr-defined]
    return wrapper


def _megatron_modules() -> list[ModuleType]:
    return [
        m
        for n, m in list(sys.modules.items())
        if isinstance(m, ModuleType) and (n == "megatron" or n.startswith("megatron."))
    ]


def patch_megatron(steps: bool = True) -> None:
    """Install the p2p wrappers into Megatron-Core (imports it if needed) and, with
    ``steps``, make ``run_one_forward_step`` the step (once the wrapper module is imported)."""
    try:
        import importlib

        comm = importlib.import_module(MEGATRON_MODULE)
    except ImportError as exc:
        raise MegatronNotFoundError(
            f"cannot patch Megatron-Core: importing {MEGATRON_MODULE} failed ({exc}); "
            "install megatron-core or use profplug.patch(megatron=False)"
        ) from exc
    for name in FUNCTIONS:
        current = comm.__dict__[name]
        if not getattr(current, "__profplug__", False):
            _originals[name] = current
            _wrappers[name] = _wrap_p2p(name, current)
    for module in _megatron_modules():
        for name in FUNCTIONS:
            if name in _originals and module.__dict__.get(name) is _originals[name]:
                setattr(module, name, _wrappers[name])
                _replaced.append((module, name, _originals[name]))
    if steps:
        from profplug.autosteps import patch_megatron_steps

        patch_megatron_steps()


def unpatch_megatron() -> None:
    """Put the original Megatron functions back wherever profplug replaced them."""
    while _replaced:
        module, name, original = _replaced.pop()
        if module.__dict__.get(name) is _wrappers.get(name):
            setattr(module, name, original)
    _originals.clear()
    _wrappers.clear()


def _short_path(path: str) -> str:
    """A call site's file, shortened: relative to site-packages or the working directory."""
    marker = os.sep + "site-packages" + os.sep
    if marker in path:
        return path.rsplit(marker, 1)[1]
    cwd = os.getcwd() + os.sep
    return path[len(cwd):] if path.startswith(cwd) else path


def _wrap_synchronize(original: Callable[..., Any]) -> Callable[..., Any]:
    import profplug.steps as steps
    from profplug.annotation import annotate

    getframe = sys._getframe
    sites: dict[tuple[Any, int], Any] = {}

    @functools.wraps(original)
    def synchronize(device: Any = None) -> None:
        frame = getframe(1)
        key = (frame.f_code, frame.f_lineno)
        rng = sites.get(key)
        if rng is None:
            code = frame.f_code
            name = ranges.synchronize_range(_short_path(code.co_filename), key[1], code.co_name)
            rng = sites[key] = annotate(name)
        steps.on_activity()
        with rng:
            return original(device)

    synchronize.__profplug__ = True  # type: ignore[attr-defined]
    return synchronize


def patch_synchronize() -> None:
    """Make every ``torch.cuda.synchronize()`` a range named after its call site."""
    global _sync_original
    import torch

    if getattr(torch.cuda.synchronize, "__profplug__", False):
        return
    _sync_original = torch.cuda.synchronize
    torch.cuda.synchronize = _wrap_synchronize(_sync_original)


def unpatch_synchronize() -> None:
    global _sync_original
    if _sync_original is None:
        return
    import torch

    if getattr(torch.cuda.synchronize, "__profplug__", False):
        torch.cuda.synchronize = _sync_original
    _sync_original = None


def patch(megatron: bool = True, synchronize: bool = True,
          step_fns: Sequence[str] = ()) -> None:
    """Apply the patches (idempotent); raises :class:`MegatronNotFoundError` if asked to
    patch Megatron-Core and it is not importable, ValueError for a malformed step function
    name (``MODULE:QUALNAME``)."""
    if synchronize:
        patch_synchronize()
    if megatron:
        patch_megatron()
    if step_fns:
        from profplug.autosteps import patch_step_fn

        for spec in step_fns:
            patch_step_fn(spec)


def unpatch() -> None:
    """Undo every profplug patch (idempotent)."""
    unpatch_megatron()
    unpatch_synchronize()
    autosteps = sys.modules.get("profplug.autosteps")
    if autosteps is not None:
        autosteps.unpatch()
