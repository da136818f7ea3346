"""profplug: what device-wide synchronizes cost pipeline-parallel PyTorch inference.

``import profplug`` is cheap and never imports torch: the runtime API (``annotate``,
``patch``, ``step``, ``p2p``) loads torch/nvtx on first use; the offline analyzer lives in
``profplug.analyzers``.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "annotate": "profplug.annotate",
    "patch": "profplug.patch",
    "unpatch": "profplug.patch",
    "step": "profplug.steps",
    "p2p": None,
}


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'profplug' has no attribute {name!r}")
    if _LAZY[name] is None:
        return importlib.import_module(f"profplug.{name}")
    return getattr(importlib.import_module(_LAZY[name]), name)
