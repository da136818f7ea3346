"""``profplug.patch()`` / ``profplug.unpatch()``: the pipelines' sync sites and steps, and
``torch.cuda.synchronize``.

- ``megatron``, ``transformers``: the built-in declarations (``profplug.libraries``): their
  sync sites (``profplug.sites``: annotated, the sync policy applied, the broadcast result
  digested) and their step functions (``profplug.autosteps``; a job's own ``profplug.step()``
  or ``--step-fn`` takes precedence), applied when the library's modules are imported (now,
  if they are). ``megatron`` imports Megatron-Core (a clear error if it cannot);
  ``transformers`` waits for the job to import it.
- ``synchronize``: every ``torch.cuda.synchronize()`` outside a sync site is the range
  ``ranges.synchronize_range(file, line, function)`` of its caller.
- ``sync_sites``: ``MODULE:QUALNAME`` functions whose synchronizes are the pipeline's
  (``--sync-site``); ``step_fns``: functions whose outermost calls are steps (``--step-fn``).

All are idempotent and reversible: originals are kept and restored where they were.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.names import FUNCTIONS, MEGATRON_MODULE, MEGATRON_WRAPPER_MODULE

__all__ = ["FUNCTIONS", "MEGATRON_MODULE", "MEGATRON_WRAPPER_MODULE"]  # their old home


class MegatronNotFoundError(ProfplugError, ImportError):
    """Megatron-Core cannot be imported, so there is nothing to patch."""


def patch_library(name: str, steps: bool = True) -> None:
    """Declare a built-in library's sync sites and, with ``steps``, its step functions; one
    line on stderr when its module is imported without them where profplug reads them."""
    import functools

    from profplug import hooks, sites
    from profplug.libraries import LIBRARIES

    lib = LIBRARIES[name]
    fresh = [s for s in lib.sites if not sites.declared(s.target)]
    for site in lib.sites:
        sites.declare(site)
    if fresh:  # after the sites' own hooks: they have run when this one does
        hooks.when_imported(lib.module, functools.partial(_check_sites, name))
        if lib.moved is not None:
            hooks.when_imported(lib.module.partition(".")[0], functools.partial(_moved, name))
    if steps:  # autosteps imports torch: not before the step functions' module is imported
        step_module = lib.step_fns[0].rpartition(":")[0]
        hooks.when_imported(step_module, functools.partial(_library_steps, name))


def _library_steps(name: str, module: ModuleType) -> None:
    from profplug.autosteps import patch_library_steps
    from profplug.libraries import LIBRARIES

    patch_library_steps(LIBRARIES[name])


def _check_sites(name: str, module: ModuleType) -> None:
    from profplug import sites
    from profplug.libraries import LIBRARIES, site_missing

    lib = LIBRARIES[name]
    mine = {s.target for s in lib.sites}
    line = site_missing(
        lib, [s["error"] for s in sites.states() if s["name"] in mine and s["error"]]
    )
    if line:
        sys.stderr.write(line + "\n")


def _moved(name: str, package: ModuleType) -> None:
    from profplug.libraries import LIBRARIES

    check = LIBRARIES[name].moved
    line = check(package) if check is not None else None
    if line:
        sys.stderr.write(line + "\n")


def patch_megatron(steps: bool = True) -> None:
    """Declare Megatron-Core's sync sites (imports it if needed) and, with ``steps``, make
    ``run_one_forward_step`` the step (once the wrapper module is imported)."""
    try:
        importlib.import_module(MEGATRON_MODULE)
    except ImportError as exc:
        raise MegatronNotFoundError(
            f"cannot patch Megatron-Core: importing {MEGATRON_MODULE} failed ({exc}); "
            "install megatron-core or use profplug.patch(megatron=False)"
        ) from exc
    patch_library("megatron", steps)


def patch_synchronize() -> None:
    """Make every ``torch.cuda.synchronize()`` a range named after its call site."""
    from profplug import syncpoint

    syncpoint.patch(call_site_ranges=True)


def unpatch_synchronize() -> None:
    syncpoint = sys.modules.get("profplug.syncpoint")
    if syncpoint is not None:
        syncpoint.unpatch(call_site_ranges=True)


def patch(
    megatron: bool = True,
    synchronize: bool = True,
    step_fns: Sequence[str] = (),
    transformers: bool = True,
    sync_sites: Sequence[str] = (),
) -> None:
    """Apply the patches (idempotent); raises :class:`MegatronNotFoundError` if asked to
    patch Megatron-Core and it is not importable, ValueError for a malformed function name
    (``MODULE:QUALNAME``)."""
    if synchronize:
        patch_synchronize()
    if megatron:
        patch_megatron()
    if transformers:
        patch_library("transformers")
    if sync_sites:
        from profplug import sites

        for spec in sync_sites:
            sites.declare(spec)
    if step_fns:
        from profplug.autosteps import patch_step_fn

        for spec in step_fns:
            patch_step_fn(spec)


def sync_site(spec: str) -> None:
    """Declare ``MODULE:QUALNAME`` a sync site (``profplug.sites``): its calls are annotated
    and the sync policy applies to the synchronizes made inside them."""
    from profplug import sites

    sites.declare(spec)


def unpatch() -> None:
    """Undo every profplug patch (idempotent)."""
    for name in ("profplug.sites", "profplug.autosteps"):
        module = sys.modules.get(name)
        if module is not None:
            module.unpatch()
    unpatch_synchronize()
