"""profplug: what device-wide synchronizes cost pipeline-parallel PyTorch inference.

``import profplug`` is cheap and never imports torch: the runtime API (``annotate``,
``patch``, ``sync_site``, ``step``, ``digest``, ``current_policy``, ``p2p``) loads torch/nvtx
on first use;
the offline analyzer lives in ``profplug.analyzers``.
"""

from __future__ import annotations

from typing import Any

from profplug.analyzers.core.version import __version__ as __version__

_LAZY = {
    "annotate": "profplug.annotation",
    "patch": "profplug.patching",
    "unpatch": "profplug.patching",
    "sync_site": "profplug.patching",
    "step": "profplug.steps",
    "digest": "profplug.digests",
    "current_policy": "profplug.policy",
    "p2p": None,
}


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
