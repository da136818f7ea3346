"""profplug: what device-wide synchronizes cost pipeline-parallel PyTorch inference.

``import profplug`` is cheap and never imports torch: the runtime API (``annotate``,
``patch``, ``sync_site``, ``step``, ``digest``, ``current_policy``, ``p2p``) loads torch/nvtx
on first use;
the offline analyzer lives in ``profplug.analyzers``.
"""

from __future__ import annotations

import os
import sys
from types import MappingProxyType
from typing import Any


class _CheckoutAnalyzers:
    """Maps the one name ``profplug.analyzers`` to a source checkout's ``analyzers/`` folder
    (a meta path finder, as the editable install's own)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "profplug.analyzers":
            return None
        from importlib.util import spec_from_file_location

        return spec_from_file_location(fullname, os.path.join(self.folder, "__init__.py"),
                                       submodule_search_locations=[self.folder])


def _checkout_analyzers() -> None:
    """Run from a source checkout's root (``python -m profplug``, ``import
    profplug.analyzers``), where the checkout's ``profplug/`` comes first on ``sys.path``
    and shadows any install: ``profplug.analyzers`` is then the checkout's ``analyzers/``.
    Only that name is mapped, and only for a ``profplug/`` without ``analyzers`` inside (a
    regular install has it; an editable one maps the same folder). An earlier
    version put the checkout root on ``__path__``, which made every top-level folder of the
    checkout (tests, scripts, benchmarks) a subpackage of profplug; this does not."""
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.join(os.path.dirname(here), "analyzers")
    if os.path.isdir(os.path.join(here, "analyzers")) or not os.path.isfile(
            os.path.join(folder, "core", "version.py")):
        return
    if not any(isinstance(f, _CheckoutAnalyzers) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutAnalyzers(folder))  # before an install's finders


_checkout_analyzers()

from profplug.analyzers.core.version import __version__ as __version__  # noqa: E402

_LAZY = MappingProxyType({
    "annotate": "profplug.annotation",
    "patch": "profplug.patching",
    "unpatch": "profplug.patching",
    "sync_site": "profplug.patching",
    "step": "profplug.steps",
    "digest": "profplug.digests",
    "current_policy": "profplug.policy",
    "p2p": None,
})


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'profplug' has no attribute {name!r}")
    module = _LAZY[name]
    if module is None:
        value = importlib.import_module(f"profplug.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value
