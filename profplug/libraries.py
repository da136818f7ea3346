"""The built-in declarations: Megatron-Core's and transformers' pipelines as sync sites and
step functions (``profplug.sites``, ``profplug.autosteps``), one :class:`Library` each.

- ``megatron`` (Megatron-Core's inference p2p, ``megatron.core.inference.communication_utils``):
  ``send_to_next_pipeline_rank``, ``recv_from_prev_pipeline_rank_`` and
  ``broadcast_from_last_pipeline_stage``, run by profplug's Megatron-compatible
  implementation (``profplug.p2p``: it names its ranges and applies the policy itself, and
  its broadcast runs on gloo too); the broadcast's result is digested. Steps: each outermost
  ``run_one_forward_step`` (or ``dummy_forward``) of an ``AbstractModelInferenceWrapper``.
- ``transformers`` (``DistributedConfig(pp_size=N)``, ``transformers.distributed.
  pipeline_parallel``; read in 5.23-5.25): ``PipelineStage.communicate`` (one
  ``batch_isend_irecv``, ``req.wait()``, then ``torch.cuda.synchronize()`` unless gloo moved
  the tensors to the CPU) and ``PipelineStage.broadcast_from_last`` (the logits, from the last
  stage to every rank) run as they are, named with Megatron's range names (send/recv with the
  peer, broadcast with root and group) so that the analyzer's call sites, what-if drop rule
  and cross-rank matching apply unchanged; the broadcast logits are digested. Steps: each
  outermost ``pipeline_parallel_naive_forward`` (the one function every rank runs once per
  model forward: recv, its layers, send, the broadcast; ``generate()`` calls the forward once
  per token).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from profplug.analyzers.core import names
from profplug.sites import SyncSite


@dataclass(frozen=True)
class Library:
    """A pipeline profplug knows: its sync sites and where its steps are."""

    name: str  # the --patch word and the step source
    module: str  # importing it applies the declaration
    sites: tuple[SyncSite, ...]
    step_fns: tuple[str, ...]  # MODULE:QUALNAME whose outermost calls are steps
    step_overrides: bool = False  # a method: its overrides in subclasses are steps too
    # run on the top package once imported: one line if the pipeline is not where it is read
    moved: Callable[[Any], str | None] | None = None


def _no_range(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    return None  # profplug.p2p names its own ranges


_MCU = names.MEGATRON_MODULE
MEGATRON = Library(
    "megatron",
    _MCU,
    tuple(
        SyncSite(
            f"{_MCU}:{fn}",
            _no_range,
            f"profplug.p2p:{fn}",
            digest=fn == names.FUNCTIONS[2],
            origin="megatron",
        )
        for fn in names.FUNCTIONS
    ),
    tuple(
        f"{names.MEGATRON_WRAPPER_MODULE}:{names.MEGATRON_WRAPPER_CLASS}.{m}"
        for m in names.MEGATRON_STEP_METHODS
    ),
    step_overrides=True,
)

# (id(stage), operation, bytes) -> (stage, its Range): a call is named by one dict look-up
_named: dict[tuple[int, str, int], tuple[Any, Any]] = {}


def _named_range(stage: Any, operation: str, nbytes: int) -> Any:
    """The cached range of a stage's send, recv (with the peer's global rank) or broadcast
    (with its root and group)."""
    key = (id(stage), operation, nbytes)
    hit = _named.get(key)
    if hit is None or hit[0] is not stage:
        import torch.distributed as dist

        from profplug.analyzers.core import ranges
        from profplug.p2p import outer_range, ranks_of

        group = stage.pp_group
        if operation == "broadcast":
            root = dist.get_global_rank(group, stage.pp_size - 1)
            rng = outer_range(ranges.BROADCAST, nbytes, root, ranks_of(group))
        else:
            send = operation == "send_forward"
            peer = dist.get_global_rank(group, stage.pp_next_rank if send else stage.pp_prev_rank)
            rng = outer_range(ranges.SEND if send else ranges.RECV, nbytes, peer)
        if len(_named) > 1024:
            _named.clear()
        hit = _named[key] = (stage, rng)
    return hit[1]


def _communicate_range(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``PipelineStage.communicate(self, operation, *, device, dtype, tensor, shape)``."""
    stage, operation = args[0], (args[1] if len(args) > 1 else kwargs.get("operation"))
    if operation == "send_forward" and not stage.pp_is_last_stage:
        tensor = kwargs.get("tensor")
        n = tensor.numel() if tensor is not None else 0
    elif operation == "recv_forward" and not stage.pp_is_first_stage:
        n = math.prod(kwargs.get("shape") or ())
    else:
        return None  # no communication (or one transformers refuses)
    return _named_range(stage, operation, n * kwargs["dtype"].itemsize)


def _broadcast_range(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``PipelineStage.broadcast_from_last(self, tensor, *, dtype, device)``."""
    stage = args[0]
    if stage.pp_size <= 1:
        return None
    tensor = args[1] if len(args) > 1 else kwargs.get("tensor")
    nbytes = tensor.numel() * kwargs["dtype"].itemsize if tensor is not None else 0
    return _named_range(stage, "broadcast", nbytes)


_TPP = names.TRANSFORMERS_MODULE
_STAGE = names.TRANSFORMERS_STAGE_CLASS
TRANSFORMERS = Library(
    "transformers",
    _TPP,
    (
        SyncSite(
            f"{_TPP}:{_STAGE}.{names.TRANSFORMERS_P2P}", _communicate_range, origin="transformers"
        ),
        SyncSite(
            f"{_TPP}:{_STAGE}.{names.TRANSFORMERS_BROADCAST}",
            _broadcast_range,
            digest=True,
            origin="transformers",
        ),
    ),
    (f"{_TPP}:{names.TRANSFORMERS_STEP_FN}",),
    moved=lambda module: transformers_moved(module),
)

LIBRARIES = MappingProxyType({lib.name: lib for lib in (MEGATRON, TRANSFORMERS)})


def transformers_moved(module: Any) -> str | None:
    """One line when the imported ``transformers`` has no pipeline where profplug reads it
    (a version whose functions have moved); None when it has (or is a version read)."""
    version = str(getattr(module, "__version__", "?"))
    if ".".join(version.split(".")[:2]) in names.TRANSFORMERS_SUPPORTED:
        return None
    base = os.path.dirname(getattr(module, "__file__", "") or "")
    path = os.path.join(base, *_TPP.split(".")[1:]) + ".py"
    if os.path.isfile(path):
        return None
    return (
        f"profplug: transformers {version}: no {_TPP} (profplug reads transformers "
        f"{', '.join(names.TRANSFORMERS_SUPPORTED)}): its pipeline is not annotated, no "
        "policy applies to it and no steps come from it; name its functions with "
        "--sync-site and --step-fn"
    )


def site_missing(lib: Library, errors: list[str]) -> str | None:
    """One line when a library's module was imported but a site was not where it should be."""
    if not errors:
        return None
    version = getattr(sys.modules.get(lib.module.split(".")[0]), "__version__", "?")
    return (
        f"profplug: {lib.name} {version}: {errors[0]} (moved?): its pipeline is not "
        "annotated and no policy applies to it; name its functions with --sync-site"
    )
