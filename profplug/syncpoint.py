"""Where the sync policy acts: the phase after a pipeline's ``req.wait()``, and the one
patched ``torch.cuda.synchronize``.

:func:`after_wait` is the one place each policy is applied, whoever waited:

- ``device``: ``torch.cuda.synchronize()`` (the range ``profplug.sync.device``);
- ``event``: no device-wide synchronize. ``req.wait()`` has already made the current stream
  wait on the communication (NCCL's ``Work.wait()`` is a stream wait); profplug records an
  event on the current stream (the range ``profplug.sync.event``) and keeps the tensors
  alive until that event completes, so a buffer is never freed or reused while the
  communication may still read or write it, whatever stream allocated it;
- ``none``: nothing (tensor lifetime left to torch's own work stash).

CPU tensors (gloo) make no CUDA call under any policy; the phase ranges still appear.

The patched ``torch.cuda.synchronize`` (:func:`patch`) has two uses, each turned on by its
own patch: inside a declared sync site (``profplug.sites``: the call is the pipeline's) it is
:func:`after_wait` under the policy in force; elsewhere, with call-site ranges on (the
``synchronize`` patch), it is the range ``profplug.synchronize <file>:<line> <function>``
around the original. Otherwise it calls the original. ``torch.accelerator.synchronize`` (the
device-agnostic spelling) is patched for the sites too. Both are installed once, on their
modules and in the modules the sites' code lives in that imported them by name.
"""

from __future__ import annotations

import collections
import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

import profplug.steps as _steps
from profplug import policy as _policy
from profplug.analyzers.core import ranges
from profplug.annotation import annotate

_SYNC_DEVICE = annotate(ranges.SYNC_DEVICE)
_SYNC_EVENT = annotate(ranges.SYNC_EVENT)
_COUNTS = _policy.COUNTS

# (event, tensors) kept alive until the event (recorded after the wait) has completed.
_pending: collections.deque[tuple[Any, list[torch.Tensor]]] = collections.deque()
_free_events: list[Any] = []

_original: Callable[..., Any] | None = None  # torch's synchronize while profplug's is in place
_accel_original: Callable[..., Any] | None = None  # torch.accelerator's, likewise
_call_site_ranges = False  # the ``synchronize`` patch: a range per call site
_sites_use = False  # declared sync sites need the interception
_replaced: list[tuple[dict[str, Any], str, Any]] = []  # (module globals, name, original)
_local = threading.local()  # .site: the innermost declared site running on this thread


def original_synchronize() -> Any:
    """``torch.cuda.synchronize`` as torch defines it, even while profplug patches it."""
    fn = torch.cuda.synchronize
    marked = getattr(fn, "__profplug__", False)
    return fn.__wrapped__ if marked else fn  # type: ignore[attr-defined]  # set by functools.wraps


def _release_completed() -> None:
    while _pending and _pending[0][0].query():
        _free_events.append(_pending.popleft()[0])


def after_wait(
    policy: str,
    tensors: list[torch.Tensor],
    on_cuda: bool,
    device_sync: bool = True,
    device: Any = None,
) -> list[torch.Tensor] | None:
    """Apply ``policy`` after a communication's wait (module docstring). Returns the list of
    tensors the event policy keeps alive (the caller may add to it), else None.
    ``device_sync=False``: the device policy synchronizes nothing (a broadcast, as Megatron)."""
    if policy == "device":
        if device_sync:
            with _SYNC_DEVICE:
                if on_cuda:
                    _COUNTS["device"][_policy.DEVICE_SYNC] += 1
                    original_synchronize()(device)
    elif policy == "event":
        with _SYNC_EVENT:
            if on_cuda:
                _COUNTS["event"][_policy.EVENT_WAIT] += 1
                _release_completed()
                event = _free_events.pop() if _free_events else torch.cuda.Event()
                event.record(torch.cuda.current_stream(device))
                _pending.append((event, tensors))
                return tensors
    return None


# -- the declared site running on this thread -------------------------------------------------
def current_site() -> Any:
    """The innermost declared sync site's call running on this thread (None: none)."""
    return getattr(_local, "site", None)


def enter_site(call: Any) -> Any:
    """Make ``call`` (a site's call record, with a ``kept`` list) the current site; returns
    the one it replaces, for :func:`exit_site`."""
    outer = getattr(_local, "site", None)
    _local.site = call
    return outer


def exit_site(outer: Any) -> None:
    _local.site = outer


# -- the patched torch.cuda.synchronize --------------------------------------------------------
def _short_path(path: str) -> str:
    """A call site's file, shortened: relative to site-packages or the working directory."""
    marker = os.sep + "site-packages" + os.sep
    if marker in path:
        return path.rsplit(marker, 1)[1]
    cwd = os.getcwd() + os.sep
    return path[len(cwd) :] if path.startswith(cwd) else path


def _in_site(call: Any, device: Any) -> None:
    """A synchronize made inside a declared site's call: the policy decides."""
    _steps.on_activity()
    policy = _policy.get()  # device: the call as written, whatever CUDA's state
    on_cuda = policy == "device" or torch.cuda.is_initialized()
    kept = after_wait(policy, [], on_cuda, device=device)
    if kept is not None:
        call.kept.append(kept)


def _wrap_accelerator(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def synchronize(device: Any = None) -> Any:
        call = getattr(_local, "site", None)
        if call is None:
            return original(device)
        return _in_site(call, device)

    synchronize.__profplug__ = True  # type: ignore[attr-defined]  # a marker on a function
    return synchronize


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    getframe = sys._getframe
    sites: dict[tuple[Any, int], Any] = {}

    @functools.wraps(original)
    def synchronize(device: Any = None) -> Any:
        call = getattr(_local, "site", None)
        if call is not None:  # a declared site's synchronize: the policy decides
            return _in_site(call, device)
        if not _call_site_ranges:
            return original(device)
        frame = getframe(1)
        key = (frame.f_code, frame.f_lineno)
        rng = sites.get(key)
        if rng is None:
            code = frame.f_code
            name = ranges.synchronize_range(_short_path(code.co_filename), key[1], code.co_name)
            rng = sites[key] = annotate(name)
        _steps.on_activity()
        with rng:
            return original(device)

    synchronize.__profplug__ = True  # type: ignore[attr-defined]  # a marker on a function
    return synchronize


def patch(call_site_ranges: bool | None = None, for_sites: bool | None = None) -> None:
    """Install profplug's ``torch.cuda.synchronize`` (idempotent) and turn its uses on:
    ``call_site_ranges`` (the ``synchronize`` patch), ``for_sites`` (declared sync sites)."""
    global _original, _call_site_ranges, _sites_use
    if call_site_ranges is not None:
        _call_site_ranges = call_site_ranges
    if for_sites is not None:
        _sites_use = for_sites
    if _original is None and not getattr(torch.cuda.synchronize, "__profplug__", False):
        _original = torch.cuda.synchronize
        torch.cuda.synchronize = _wrap(_original)
    _patch_accelerator()


def _patch_accelerator() -> None:
    global _accel_original
    accel = getattr(torch, "accelerator", None)
    fn = getattr(accel, "synchronize", None)
    if (_accel_original is None and accel is not None and fn is not None
            and not getattr(fn, "__profplug__", False)):
        _accel_original = fn
        accel.synchronize = _wrap_accelerator(fn)


def cover(namespace: dict[str, Any]) -> None:
    """Replace, in a module's globals, every name bound to torch's synchronizes (``from
    torch.cuda import synchronize``) with profplug's."""
    ours = {
        id(orig): (orig, new)
        for orig, new in (
            (_original, torch.cuda.synchronize),
            (_accel_original, getattr(getattr(torch, "accelerator", None), "synchronize", None)),
        )
        if orig is not None
    }
    for name, value in list(namespace.items()):
        hit = ours.get(id(value))
        if hit is not None and hit[0] is value:
            namespace[name] = hit[1]
            _replaced.append((namespace, name, value))


def unpatch(call_site_ranges: bool = False, for_sites: bool = False) -> None:
    """Turn the given uses off; once neither is on, put torch's synchronize back everywhere."""
    global _original, _call_site_ranges, _sites_use
    if call_site_ranges:
        _call_site_ranges = False
    if for_sites:
        _sites_use = False
    if _original is None or _call_site_ranges or _sites_use:
        return
    global _accel_original
    if getattr(torch.cuda.synchronize, "__profplug__", False):
        torch.cuda.synchronize = _original
    accel = getattr(torch, "accelerator", None)
    if (_accel_original is not None and accel is not None
            and getattr(accel.synchronize, "__profplug__", False)):
        accel.synchronize = _accel_original
    while _replaced:
        namespace, name, original = _replaced.pop()
        if getattr(namespace.get(name), "__profplug__", False):
            namespace[name] = original
    _original = _accel_original = None
