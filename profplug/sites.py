"""Declared sync sites: functions whose device-wide synchronizes are the pipeline's.

A sync site is a function (``MODULE:QUALNAME``: a module-level function or a method, e.g.
``mypipe:Stage.recv``) that sends, receives or broadcasts between pipeline stages and
synchronizes the device after waiting. Declaring it (``profplug run/ab --sync-site``,
``PROFPLUG_SYNC_SITE``, :func:`declare` / ``profplug.sync_site``) makes profplug, as soon as
MODULE is imported and whole (now, if it is):

- annotate each call: a range around it, ``profplug.sync_site MODULE:QUALNAME`` unless the
  declaration names the call itself (a built-in one: Megatron's send/recv/broadcast names,
  with the peer);
- apply the sync policy to every ``torch.cuda.synchronize()`` (or
  ``torch.accelerator.synchronize()``) made inside the call
  (:func:`profplug.syncpoint.after_wait`: ``device`` keeps it, ``event`` replaces it with
  an event on the current stream that keeps the call's tensor arguments and result alive
  until the communication is done, ``none`` drops it) and count the call as the policy
  reaching the job;
- digest the call's result when the declaration says it is the step's output.

Megatron-Core and transformers are built-in declarations (``profplug.libraries``). A
declaration may name an implementation to call instead of the original (Megatron's, whose
own broadcast needs CUDA: ``profplug.p2p`` runs it on gloo too and applies the policy itself).

The function is replaced on its owner and, for a module-level function, in every loaded
module that imported it by name; the original is kept (``functools.wraps``), declaring
twice is a no-op, and :func:`unpatch` puts every original back.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from profplug.config import parse_step_fn

RangeFor = Callable[[tuple[Any, ...], dict[str, Any]], Any]  # (args, kwargs) -> Range | None


@dataclass(frozen=True)
class SyncSite:
    """A declaration: which function, how its calls are named, what they produce."""

    target: str  # "MODULE:QUALNAME"
    range_for: RangeFor | None = None  # the call's range (None from it: no range); unset:
    # ``profplug.sync_site TARGET``
    implementation: str | None = None  # "MODULE:NAME" called instead of the original
    digest: bool = False  # the call's result is the step's output (profplug.digest)
    origin: str = "declared"  # "declared", or the library that declares it


@dataclass
class SiteState:
    """What became of a declaration in this process (the status file's ``sync_sites``)."""

    site: SyncSite
    patched: bool = False
    calls: int = 0
    error: str | None = None
    kept: list[list[Any]] = field(default_factory=list)  # the running call's event lists

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.site.target,
            "origin": self.site.origin,
            "patched": self.patched,
            "calls": self.calls,
            "error": self.error,
        }


_states: dict[str, SiteState] = {}
# (owner, attribute, original value, profplug's value, site) for every attribute profplug set
_replaced: list[tuple[Any, str, Any, Any, str]] = []


_ABSENT = object()  # the owner had no attribute of its own: unpatching deletes profplug's


def _resolve(module: ModuleType, qualname: str) -> tuple[Any, str, Any, Any]:
    """(owner, attribute, value as stored, what to restore: the value, or ``_ABSENT`` for a
    method a class inherits) of ``qualname`` in ``module``; AttributeError."""
    *path, name = qualname.split(".")
    owner: Any = module
    for part in path:
        owner = getattr(owner, part)
    for holder in owner.__mro__ if isinstance(owner, type) else (owner,):
        if name in getattr(holder, "__dict__", {}):
            raw = holder.__dict__[name]
            return owner, name, raw, raw if holder is owner else _ABSENT
    raise AttributeError(name)


def _tensors(values: Any) -> list[Any]:
    import torch

    return [v for v in values if isinstance(v, torch.Tensor)]


def _wrapper(state: SiteState, original: Callable[..., Any]) -> Callable[..., Any]:
    import profplug.steps as steps
    from profplug import policy, syncpoint
    from profplug.analyzers.core import ranges
    from profplug.annotation import annotate
    from profplug.digests import digest

    site = state.site
    impl = original
    if site.implementation is not None:
        mod, _, name = site.implementation.rpartition(":")
        impl = getattr(importlib.import_module(mod), name)
    range_for = site.range_for
    fixed = annotate(ranges.sync_site_range(site.target)) if range_for is None else None
    counts = policy.COUNTS
    count_here = site.implementation is None  # an implementation counts its own calls
    out_digest = site.digest

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state.calls += 1
        steps.on_activity()
        if count_here:
            counts[policy.get()][policy.P2P] += 1
        rng = fixed if range_for is None else range_for(args, kwargs)
        kept_before = len(state.kept)
        outer = syncpoint.enter_site(state)
        try:
            if rng is None:
                out = impl(*args, **kwargs)
            else:
                with rng:
                    out = impl(*args, **kwargs)
        finally:
            syncpoint.exit_site(outer)
        if len(state.kept) > kept_before:  # the event policy replaced a synchronize
            alive = _tensors((*args, *kwargs.values(), out))
            for kept in state.kept[kept_before:]:
                kept.extend(alive)
            del state.kept[kept_before:]
        if out_digest and out is not None:
            digest(out)
        return out

    wrapper.__profplug__ = True  # type: ignore[attr-defined]  # a marker on a function
    return wrapper


def install(state: SiteState, module: ModuleType) -> None:
    """Wrap the site's function in ``module`` (and where it was imported by name)."""
    from profplug import syncpoint

    if state.patched or _states.get(state.site.target) is not state:
        return
    _, qualname = parse_step_fn(state.site.target)
    try:
        owner, name, raw, restore = _resolve(module, qualname)
    except AttributeError:
        state.error = f"{module.__name__} has no attribute {qualname!r}"
        return
    fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    if not callable(fn):
        state.error = f"{qualname} is a {type(raw).__name__}, not a function"
        return
    if getattr(fn, "__profplug__", False):
        state.patched = True
        return
    if state.site.implementation is None:  # the original's synchronizes: the policy's
        syncpoint.patch(for_sites=True)
        syncpoint.cover(getattr(fn, "__globals__", {}))
    new: Any = _wrapper(state, fn)
    if isinstance(raw, (staticmethod, classmethod)):
        new = type(raw)(new)
    target = state.site.target
    setattr(owner, name, new)
    _replaced.append((owner, name, restore, new, target))
    if owner is module:  # a module-level function: where it was imported by name too
        for other in list(sys.modules.values()):
            d = getattr(other, "__dict__", None)
            if other is not module and isinstance(d, dict) and d.get(name) is fn:
                setattr(other, name, new)
                _replaced.append((other, name, fn, new, target))
    state.patched, state.error = True, None


def declare(site: SyncSite | str) -> SiteState:
    """Declare a sync site (a ``MODULE:QUALNAME`` string or a :class:`SyncSite`); applied
    once MODULE is imported and whole (now, if it is). ValueError for a malformed name."""
    from profplug import hooks

    if isinstance(site, str):
        parse_step_fn(site)
        if ".py" in site.rpartition(":")[0]:
            raise ValueError(f"{site}: a sync site's MODULE is a module name, not a path")
        site = SyncSite(site.strip())
    state = _states.get(site.target)
    if state is not None:
        return state
    state = _states[site.target] = SiteState(site)
    module_name, _ = parse_step_fn(site.target)
    hooks.when_imported(module_name, functools.partial(_on_import, state))
    return state


def _on_import(state: SiteState, module: ModuleType) -> None:
    install(state, module)


def declared(target: str) -> bool:
    """Whether ``MODULE:QUALNAME`` is declared in this process."""
    return target in _states


def states() -> list[dict[str, Any]]:
    """What became of each site in this process (for the status file): every one declared
    for the job, and a library's once the job imported its module."""
    return [
        s.as_dict() for s in _states.values() if s.site.origin == "declared" or s.patched or s.error
    ]


def unpatch(origin: str | None = None) -> None:
    """Put the originals back and forget the declarations (of ``origin`` only, if given)."""
    from profplug import syncpoint

    gone = {t for t, s in _states.items() if origin is None or s.site.origin == origin}
    kept = []
    for owner, name, original, new, target in reversed(_replaced):
        if target not in gone:
            kept.append((owner, name, original, new, target))
        elif getattr(owner, "__dict__", {}).get(name) is new:
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
    _replaced[:] = reversed(kept)
    for t in gone:
        del _states[t]
    if not _states:
        syncpoint.unpatch(for_sites=True)
