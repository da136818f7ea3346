"""Which host API calls block the host, and how widely: name -> sync kind.

Names are matched after dropping Nsight's version suffix (``cudaDeviceSynchronize_v3020``)
and the per-thread-stream suffixes (``_ptsz``, ``_ptds``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from types import MappingProxyType

import numpy as np
from profplug.analyzers.core.memo import Memo, read_only

NONE, DEVICE, EVENT, STREAM_WAIT, LAUNCH = 0, 1, 2, 3, 4
KIND_LABELS = MappingProxyType({DEVICE: "device", EVENT: "event", STREAM_WAIT: "stream_wait"})

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


def _per_symbol(names: list[str], what: str, memo: Memo | None) -> np.ndarray:
    """``what`` ("sync kinds" or "NCCL kernels") per symbol of ``names``; with ``memo``, once
    per table (a timeline's ``names``, append-only once read) and length, then read-only."""
    if memo is None:
        return _classified(names, what)
    return memo.get(what, (names,), lambda: read_only(_classified(names, what)),
                    version=len(names))


def _classified(names: list[str], what: str) -> np.ndarray:
    if what == "sync kinds":
        return np.fromiter((sync_kind(n) for n in names), dtype=np.int8, count=len(names))
    return np.fromiter((is_comm_kernel(n) for n in names), dtype=bool, count=len(names))


def kinds_for_symbols(names: list[str], memo: Memo | None = None) -> np.ndarray:
    """An int8 lookup: symbol id -> sync kind (one pass over the symbol table; with a
    ``memo``, once per table, read-only)."""
    return _per_symbol(names, "sync kinds", memo)


def is_comm_kernel(name: str) -> bool:
    low = name.lower()
    return "nccl" in low or "rccl" in low


def comm_for_symbols(names: list[str], memo: Memo | None = None) -> np.ndarray:
    """A bool lookup: symbol id -> NCCL/RCCL kernel (with a ``memo``: once per table,
    read-only)."""
    return _per_symbol(names, "NCCL kernels", memo)


# How strongly a kind holds the host, weakest first: a call's top-level kind is the strongest
# among itself and the calls nested in it.
_STRENGTH = np.array([0, 3, 2, 1, 0], dtype=np.int8)  # by kind id: NONE DEVICE EVENT SW LAUNCH
_BY_STRENGTH = np.array([NONE, STREAM_WAIT, EVENT, DEVICE], dtype=np.int8)


def top_level_kinds(api_kind: np.ndarray, api_top: np.ndarray) -> np.ndarray:
    """Per host API call, the sync kind of its top-level call, on the top-level call only.

    ``api_kind``: each call's own kind (:func:`kinds_for_symbols` of its name);
    ``api_top``: the nesting column (``Timeline.api_tops()``). A top-level call gets the
    strongest kind (device > event > stream wait > none) among itself and its descendants:
    a runtime call blocks because the driver sync inside it does (``cuCtxSynchronize`` in
    ``cudaDeviceSynchronize``, or in ``cudaFree``), so it is that kind of sync. A nested call
    gets NONE: its time is its top-level call's, counted once there.
    """
    n = api_kind.size
    best = np.zeros(n, dtype=np.int8)
    if n:
        np.maximum.at(best, api_top, _STRENGTH[np.minimum(api_kind, _STRENGTH.size - 1)])
    out = _BY_STRENGTH[best]
    out[api_top != np.arange(n)] = NONE
    return out


def call_kinds(names: list[str], api_name: np.ndarray, api_top: np.ndarray,
               memo: Memo | None = None) -> np.ndarray:
    """Per host API call (its symbol ``api_name`` in ``names``), the sync kind of its
    top-level call, on the top-level call only (:func:`top_level_kinds`; ``api_top``: the
    nesting column, ``Timeline.api_tops()``)."""
    own = kinds_for_symbols(names, memo)[api_name] if api_name.size else np.zeros(0, dtype=np.int8)
    return top_level_kinds(own, api_top)
