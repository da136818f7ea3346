"""Steps without ``profplug.step()`` in the job: each outermost call of a chosen function
is one step.

- ``patch_step_fn("MODULE:QUALNAME")`` (``profplug run --step-fn``): a module-level function
  or a (static/class) method, e.g. ``stepmod:decode`` or ``engine:Engine.step``; patched as
  soon as MODULE is imported and its body has finished (post-import hook), so the job needs
  no change. MODULE may be the script itself (``__main__``, its path, or the module of
  ``python -m``): its function is wrapped once the script's body defines it
  (:mod:`profplug.scriptsteps`). MODULE may be a file path of a module the job imports.
- ``patch_library_steps(library)``: a built-in declaration's step functions
  (``profplug.libraries``), at the ``library`` source level. A plain function (transformers'
  ``pipeline_parallel_naive_forward``) is patched as a ``--step-fn`` is; methods with
  ``step_overrides`` are patched on their class and on every subclass that overrides them
  (found at patch time, and when later subclasses are created, through the base's
  ``__init_subclass__``): Megatron-Core's ``AbstractModelInferenceWrapper.
  run_one_forward_step``, which both the static controller and the dynamic engine call once
  per forward step, and its ``dummy_forward`` (the dynamic engine's forward on an
  expert-parallel rank without requests), so every rank counts the same steps and windows
  stay aligned.

Calls nested in a call of the same or a higher source are part of the enclosing step (a
subclass override calling ``super().run_one_forward_step``). Calls made while the current
CUDA stream captures a graph (Megatron's dynamic engine warms up and may capture CUDA
graphs through ``run_one_forward_step``) are not steps: a window opening there would put a barrier
and a device synchronize into the capture. A call of an async function is
one step until its coroutine finishes. Which source wins when several occur:
:mod:`profplug.steps`. Every patch keeps the original, uses ``functools.wraps``, is
idempotent and is undone by :func:`unpatch`. Step functions are expected on one thread.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

import profplug.steps as _steps
from profplug import scriptsteps
from profplug.config import is_step_fn_path, parse_step_fn

if TYPE_CHECKING:
    from profplug.libraries import Library


@dataclass
class Target:
    """A step function and what became of it in this process."""

    name: str  # "MODULE:QUALNAME"
    level: int
    source: str | None = None  # the library, at the library level
    patched: bool = False
    calls: int = 0
    error: str | None = None
    where: str | None = None  # "module" | "script" (the script's own function), once known
    watching: bool = False  # a hook or the script watch is set up

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "patched": self.patched, "calls": self.calls,
                "error": self.error, "where": self.where}


_active = -1  # the highest source with a step-function call in progress
_targets: dict[str, Target] = {}
# (owner, attribute, original value or _ABSENT) for every attribute profplug set.
_replaced: list[tuple[Any, str, Any]] = []
_ABSENT = object()
_libraries: dict[str, tuple[Library, list[Target]]] = {}  # library name -> its step targets


def _capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (False until CUDA is used)."""
    cuda = torch.cuda
    return cuda.is_initialized() and cuda.is_current_stream_capturing()


def step_wrapper(fn: Callable[..., Any], target: Target) -> Callable[..., Any]:
    """``fn`` with each outermost call (per source level) made one step."""
    level, source = target.level, target.source
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            global _active
            target.calls += 1
            if _active >= level or _capturing():
                return await fn(*args, **kwargs)
            outer, _active = _active, level
            try:
                with _steps.begin(level, source):
                    return await fn(*args, **kwargs)
            finally:
                _active = outer

        async_wrapper.__profplug_step__ = target  # type: ignore[attr-defined]  # a marker
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _active
        target.calls += 1
        if _active >= level or _capturing():
            return fn(*args, **kwargs)
        outer, _active = _active, level
        try:
            with _steps.begin(level, source):
                return fn(*args, **kwargs)
        finally:
            _active = outer

    wrapper.__profplug_step__ = target  # type: ignore[attr-defined]  # a marker on a function
    return wrapper


def _raw(owner: Any, name: str) -> tuple[Any, bool]:
    """The attribute as stored (a staticmethod stays one) and whether ``owner`` holds it."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name], klass is owner
        raise AttributeError(name)
    if name in getattr(owner, "__dict__", {}):
        return owner.__dict__[name], True
    raise AttributeError(name)


def _wrap_attribute(owner: Any, name: str, target: Target) -> None:
    raw, own = _raw(owner, name)
    fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    if getattr(fn, "__profplug_step__", None) is not None:
        return  # already a step function
    if not callable(fn):
        raise TypeError(f"{name} is a {type(raw).__name__}, not a function")
    new: Any = step_wrapper(fn, target)
    if isinstance(raw, (staticmethod, classmethod)):
        new = type(raw)(new)
    setattr(owner, name, new)
    _replaced.append((owner, name, raw if own else _ABSENT))


def _apply(target: Target, module: ModuleType) -> None:
    _, qualname = parse_step_fn(target.name)
    *path, name = qualname.split(".")
    try:
        owner: Any = module
        for part in path:
            owner = getattr(owner, part)
        _wrap_attribute(owner, name, target)
    except (AttributeError, TypeError) as exc:
        missing = f"{module.__name__} has no attribute {qualname!r}"
        target.error = missing if isinstance(exc, AttributeError) else f"{qualname}: {exc}"
        return
    target.patched = True
    target.error = None


def patch_step_fn(spec: str) -> Target:
    """Make ``MODULE:QUALNAME`` a step boundary once MODULE is imported and whole (now if it
    is); the script's own functions once its body defines them."""
    from profplug import hooks

    module_name, _ = parse_step_fn(spec)
    target = _targets.get(spec)
    if target is None:
        target = _targets[spec] = Target(spec, _steps.STEP_FN)
    if target.patched:
        return target
    if scriptsteps.names_the_script(module_name):
        if not target.watching:
            target.watching, target.where = True, "script"
            why = scriptsteps.when_defined(functools.partial(_try_script, target))
            if why is not None:
                target.error = why
        return target
    if is_step_fn_path(module_name):
        name = scriptsteps.module_name_for(module_name)
        if name is None:
            target.error = (f"{module_name} is neither the script that runs nor a file under "
                            "sys.path")
            return target
        module_name = name
    target.where = "module"
    hooks.when_imported(module_name, functools.partial(_on_import, spec))
    return target


def _try_script(target: Target) -> bool:
    """Wrap the script's function if its body has defined it by now."""
    if target.patched or _targets.get(target.name) is not target:
        return True  # done, or unpatched in the meantime
    main = scriptsteps.main_module()
    if main is not None:
        _apply(target, main)
    return target.patched


def _on_import(spec: str, module: ModuleType) -> None:
    target = _targets.get(spec)
    if target is not None and not target.patched:  # not unpatched in the meantime
        _apply(target, module)


def targets() -> list[dict[str, Any]]:
    """What became of each ``--step-fn`` in this process (for the status file)."""
    return [t.as_dict() for t in _targets.values()]


# -- built-in declarations (profplug.libraries) ----------------------------------------------
def _wrap_overrides(cls: type, targets: list[Target]) -> None:
    for target in targets:
        name = target.name.rpartition(".")[2]
        if name in cls.__dict__:
            _wrap_attribute(cls, name, target)


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    todo: list[type] = list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        out.append(sub)
        todo.extend(sub.__subclasses__())
    return out


def _patch_class(lib_name: str, module: ModuleType) -> None:
    """The library's step methods on their class, its subclasses and those created later."""
    if lib_name not in _libraries:
        return  # unpatched in the meantime
    targets = _libraries[lib_name][1]
    base_name = parse_step_fn(targets[0].name)[1].split(".")[0]
    base = getattr(module, base_name, None)
    if base is None:  # the module is still being imported
        return
    if getattr(base.__dict__.get("__init_subclass__"), "__profplug_step__", None):
        return  # already patched
    for cls in (base, *_subclasses(base)):
        _wrap_overrides(cls, targets)
    previous = base.__dict__.get("__init_subclass__")

    def init_subclass(cls: type, /, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        if lib_name in _libraries:
            _wrap_overrides(cls, targets)

    init_subclass.__profplug_step__ = targets[0]  # type: ignore[attr-defined]  # a marker
    base.__init_subclass__ = classmethod(init_subclass)
    _replaced.append((base, "__init_subclass__", _ABSENT if previous is None else previous))
    for t in targets:
        t.patched = True


def _patch_function(target: Target, module: ModuleType) -> None:
    if not target.patched:
        _apply(target, module)


def patch_library_steps(lib: Library) -> None:
    """Each outermost call of the library's step functions is one step; applied when their
    module is imported (now, if it already is)."""
    from profplug import hooks

    if lib.name in _libraries:
        return
    targets = [Target(spec, _steps.LIBRARY, lib.name) for spec in lib.step_fns]
    _libraries[lib.name] = (lib, targets)
    module_name = parse_step_fn(lib.step_fns[0])[0]
    if lib.step_overrides:
        hooks.when_imported(module_name, functools.partial(_patch_class, lib.name))
    else:
        for target in targets:
            hooks.when_imported(parse_step_fn(target.name)[0],
                                functools.partial(_patch_function, target))


def unpatch() -> None:
    """Restore every attribute profplug replaced; forget the step functions."""
    _libraries.clear()
    while _replaced:
        owner, name, original = _replaced.pop()
        if original is _ABSENT:
            if name in getattr(owner, "__dict__", {}):
                delattr(owner, name)
        else:
            setattr(owner, name, original)
    _targets.clear()
    scriptsteps.stop()
