"""Megatron-Core-compatible pipeline send/recv/broadcast with a sync policy and ranges.

Same signatures and semantics as ``megatron.core.inference.communication_utils`` (0.16.1),
plus a keyword ``sync``:

- ``device``: Megatron's behaviour: ``torch.cuda.synchronize()`` after ``req.wait()`` in
  send/recv (broadcast never synchronizes, as in Megatron).
- ``event``: no device-wide synchronize; an event on the current stream keeps the tensors
  alive until the communication is done.
- ``none``: ``req.wait()`` only.

The phase after the wait is :func:`profplug.syncpoint.after_wait`, the same for every
declared sync site. CPU tensors (gloo) make no CUDA call under any policy; the phase ranges
still appear.
``pp_group=None`` uses Megatron's ``parallel_state`` when it is initialized, else the
default (WORLD) group with ring neighbours, so the functions also work without Megatron.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.distributed as dist

import profplug.steps as _steps
from profplug import policy as _policy
from profplug.analyzers.core import ranges
from profplug.annotation import annotate
from profplug.config import sync_policy
from profplug.syncpoint import after_wait
from profplug.syncpoint import original_synchronize as original_synchronize  # public here too

__all__ = [
    "broadcast_from_last_pipeline_stage",
    "default_sync",
    "recv_from_prev_pipeline_rank_",
    "send_to_next_pipeline_rank",
    "set_default_sync",
]

_POST = annotate(ranges.POST)
_WAIT = annotate(ranges.WAIT)

_COUNTS = _policy.COUNTS  # per policy: what it touched (profplug.policy)
_outer: dict[tuple[Any, ...], Any] = {}  # (name, bytes, peer[, group]) -> cached Range
_group_ranks: dict[int, tuple[Any, tuple[int, ...]]] = {}  # id(group) -> (group, global ranks)


def default_sync() -> str:
    """The policy used when ``sync=None``: the policy in force (``profplug.current_policy``'s
    switch: ``PROFPLUG_SYNC`` until ``profplug ab --switch-every`` flips it), else
    ``device``."""
    return _policy.get()


def set_default_sync(policy: str | None) -> None:
    """Set the process-wide default policy; ``None`` re-reads ``PROFPLUG_SYNC``."""
    _policy.set_policy(policy)


def _parallel_state() -> Any:
    ps = sys.modules.get("megatron.core.parallel_state")
    if ps is not None and ps.model_parallel_is_initialized():
        return ps
    return None


def _check_group(pp_group: Any) -> None:
    if not isinstance(pp_group, dist.ProcessGroup):
        raise TypeError("pp_group must be a single ProcessGroup, not a list of ProcessGroups")


def _neighbour(pp_group: Any, offset: int) -> int:
    """Global rank of the previous (-1) or next (+1) pipeline stage (ring, like Megatron)."""
    if pp_group is None:
        ps = _parallel_state()
        if ps is not None:
            if offset > 0:
                return int(ps.get_pipeline_model_parallel_next_rank())
            return int(ps.get_pipeline_model_parallel_prev_rank())
        pp_group = dist.group.WORLD
    else:
        _check_group(pp_group)
    ranks = dist.get_process_group_ranks(pp_group)
    return int(ranks[(pp_group.rank() + offset) % pp_group.size()])


def _sync(policy: str, tensors: tuple[torch.Tensor, ...], device_sync: bool = True) -> None:
    """The phase after ``req.wait()`` (:func:`profplug.syncpoint.after_wait`)."""
    after_wait(policy, list(tensors), tensors[0].is_cuda, device_sync, None)


def outer_range(name: str, nbytes: int, peer: int, group: tuple[int, ...] | None = None
                ) -> Any:
    """The cached range of a whole send/recv (``peer`` in its name) or broadcast (``root`` =
    ``peer`` and the group's global ranks in its name); see ``ranges.split_payload``."""
    key = (name, nbytes, peer, group)
    rng = _outer.get(key)
    if rng is None:
        if len(_outer) > 1024:
            _outer.clear()
        label = ranges.broadcast_range(peer, group) if name == ranges.BROADCAST \
            else ranges.p2p_range(name, peer)
        rng = _outer[key] = annotate(label, bytes=nbytes)
    return rng


def ranks_of(group: Any) -> tuple[int, ...]:
    """The global ranks of ``group`` (WORLD when None), looked up once per group."""
    hit = _group_ranks.get(id(group))
    if hit is None or hit[0] is not group:
        g = dist.group.WORLD if group is None else group
        hit = _group_ranks[id(group)] = (group, tuple(dist.get_process_group_ranks(g)))
    return hit[1]


def _p2p(op: Any, tensor: torch.Tensor, peer: int, name: str, sync: str | None) -> None:
    _steps.on_activity()
    policy = _policy.get() if sync is None else sync_policy(sync)
    _COUNTS[policy][_policy.P2P] += 1
    with outer_range(name, tensor.numel() * tensor.element_size(), peer):
        with _POST:
            reqs = dist.batch_isend_irecv([dist.P2POp(op, tensor, peer)])
        with _WAIT:
            for req in reqs:
                req.wait()
        _sync(policy, (tensor,))


def recv_from_prev_pipeline_rank_(
    recv_buffer: torch.Tensor | None = None,
    pp_group: dist.ProcessGroup | None = None,
    *,
    sync: str | None = None,
) -> None:
    """Receive from the previous pipeline stage into ``recv_buffer`` (in place)."""
    if recv_buffer is None:
        raise ValueError("recv_buffer is required")
    prev_rank = _neighbour(pp_group, -1)
    _p2p(dist.irecv, recv_buffer, prev_rank, ranges.RECV, sync)


def send_to_next_pipeline_rank(
    tensor: torch.Tensor | None = None,
    pp_group: dist.ProcessGroup | None = None,
    *,
    sync: str | None = None,
) -> None:
    """Send ``tensor`` to the next pipeline stage."""
    if tensor is None:
        raise ValueError("tensor is required")
    next_rank = _neighbour(pp_group, +1)
    _p2p(dist.isend, tensor, next_rank, ranges.SEND, sync)


def _comm_device(group: Any) -> torch.device:
    """Where a received broadcast tensor lives: CUDA for NCCL groups, CPU for gloo."""
    backend = str(dist.get_backend(group)).lower()
    if "gloo" in backend and "nccl" not in backend:
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_from_last_pipeline_stage(
    size: list[int],
    dtype: torch.dtype,
    tensor: torch.Tensor | None = None,
    pp_group: dist.ProcessGroup | None = None,
    *,
    sync: str | None = None,
) -> torch.Tensor:
    """Broadcast ``tensor`` (given on the last stage) to every stage; returns it everywhere."""
    _steps.on_activity()
    policy = _policy.get() if sync is None else sync_policy(sync)
    group: Any = pp_group
    if pp_group is None:
        ps = _parallel_state()
        if ps is not None:
            group = ps.get_pipeline_model_parallel_group()
            last_rank = ps.get_pipeline_model_parallel_last_rank()
            is_last = ps.is_pipeline_last_stage(ignore_virtual=True)
        else:
            last_rank = dist.get_world_size() - 1
            is_last = dist.get_rank() == last_rank
    else:
        _check_group(pp_group)
        last_rank = dist.get_process_group_ranks(pp_group)[pp_group.size() - 1]
        is_last = pp_group.rank() == pp_group.size() - 1

    if is_last:
        if tensor is None:
            raise ValueError("the last pipeline stage must pass the tensor to broadcast")
        if list(size) != list(tensor.shape):
            raise ValueError(f"Expected tensor of shape {size} but got {list(tensor.shape)}")
        if dtype != tensor.dtype:
            raise ValueError(f"Expected tensor of type {dtype} but got {tensor.dtype}")
        if not tensor.is_contiguous():
            raise ValueError("the tensor to broadcast must be contiguous")
    else:
        tensor = torch.empty(size, dtype=dtype, device=_comm_device(group))

    with outer_range(ranges.BROADCAST, tensor.numel() * tensor.element_size(), last_rank,
                      ranks_of(group)):
        with _POST:
            work = dist.broadcast(tensor, src=last_rank, group=group, async_op=True)
        with _WAIT:
            work.wait()
        _sync(policy, (tensor,), device_sync=False)
    return tensor
