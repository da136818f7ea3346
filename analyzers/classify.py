"""Which host API calls block the host, and how widely: name -> sync kind.

Names are matched after dropping Nsight's version suffix (``cudaDeviceSynchronize_v3020``)
and the per-thread-stream suffixes (``_ptsz``, ``_ptds``).
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

NONE, DEVICE, EVENT, STREAM_WAIT, LAUNCH = 0, 1, 2, 3, 4
KIND_LABELS = {DEVICE: "device", EVENT: "event", STREAM_WAIT: "stream_wait"}

DEVICE_SYNC = frozenset({
    "cudaDeviceSynchronize", "cuCtxSynchronize", "hipDeviceSynchronize", "hipCtxSynchronize",
})
EVENT_SYNC = frozenset({
    "cudaEventSynchronize", "cudaStreamSynchronize", "cuEventSynchronize",
    "cuStreamSynchronize", "hipEventSynchronize", "hipStreamSynchronize",
    # blocking copies wait for the copy (and the stream before it), not the whole device
    "cudaMemcpy", "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyHtoD", "cuMemcpyDtoD", "hipMemcpy",
    "cudaMemcpy2D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol",
})
STREAM_WAIT_APIS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent"})

_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?(_v\d+)?$")


@lru_cache(maxsize=4096)  # called per sync call; few distinct names
def base_name(name: str) -> str:
    """``cudaDeviceSynchronize_v3020`` -> ``cudaDeviceSynchronize``."""
    return _SUFFIX.sub("", name) if "_" in name else name


def sync_kind(name: str) -> int:
    n = base_name(name)
    if n in DEVICE_SYNC:
        return DEVICE
    if n in EVENT_SYNC:
        return EVENT
    if n in STREAM_WAIT_APIS:
        return STREAM_WAIT
    return NONE


def kinds_for_symbols(names: list[str]) -> np.ndarray:
    """An int8 lookup: symbol id -> sync kind (one pass over the symbol table)."""
    return np.fromiter((sync_kind(n) for n in names), dtype=np.int8, count=len(names))


def is_comm_kernel(name: str) -> bool:
    low = name.lower()
    return "nccl" in low or "rccl" in low


def comm_for_symbols(names: list[str]) -> np.ndarray:
    return np.fromiter((is_comm_kernel(n) for n in names), dtype=bool, count=len(names))
