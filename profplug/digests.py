"""``profplug.digest(tensor)``: fold a cheap hash of what a step produced into a per-rank,
per-step digest, computed on the tensor's device with no host synchronization.

Off unless ``PROFPLUG_DIGEST=1`` (``profplug ab`` sets it) or :func:`enable` was called:
then a call costs one test. On, a call launches two small kernels (weigh, sum into a
preallocated slot; three when the bytes must be widened first) and the host keeps only the
call's step; the values are read once, at the end of the process (:func:`summary`), so
``profplug ab`` can say whether every run produced the same outputs, and name the first step
and rank that did not. The plan of a (dtype, shape, device) is made once.

Definition (deterministic: the same dtype, shape and bytes give the same digest on any run
and device). A tensor is detached and made contiguous (complex: as real pairs; bool: as
bytes); its bytes are read as signed 64-bit words when they fill whole 8-byte words, else
as signed 32-bit words when they fill whole 4-byte words (widened), else as unsigned bytes
(widened): ``x_0..x_{n-1}`` (a view not starting on a word boundary is copied first). Its hash is ``h = sum_i w_i * x_i mod 2**64``
with ``w_i = (i + 1) * 0x9E3779B97F4A7C15 mod 2**64``, made odd (so any single changed word
changes ``h``). A step's digest folds its calls in order:
``d = (d * 0x100000001B3 + h + salt) mod 2**64`` from ``d = 0xCBF29CE484222325``, where
``salt`` is the CRC-32 of the dtype and shape. The rank's digest folds its step digests.
torch's int64 arithmetic wraps (two's complement) on CPU and CUDA, and wrapped addition does
not depend on the order of the reduction.

A call belongs to the most recently begun step (a Megatron broadcast right after
``run_one_forward_step`` belongs to that step); only steps ``0 .. limit-1`` outside the
``window`` are digested; calls before the first step or after the limit, and calls during a
CUDA graph capture, are counted, not digested. Under ``profplug ab`` the window is the timed
one (``--skip .. --skip + --steps - 1``): a call there costs one comparison and launches
nothing, so the timed steps run the job's own work only (a digest costs a few us of host
time and two or three small kernels: +12% of a launch-bound decode step on an H200). The
steps digested are the warm-up ones before the window and up to ``AFTER_WINDOW`` after it
(``limit`` = ``--skip + --steps + AFTER_WINDOW``).
"""

from __future__ import annotations

import zlib
from typing import Any

import torch

import profplug.steps as _steps

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
PRIME = 0x100000001B3
BASIS = 0xCBF29CE484222325
_SIGNED_GOLDEN = GOLDEN - (1 << 64)
_CHUNK = 256  # slots per device buffer chunk
AFTER_WINDOW = 1000  # steps digested after profplug ab's timed window, at most

__all__ = ["digest", "enable", "enabled", "fold", "summary"]


class _State:
    """The digests of one process (one rank)."""

    def __init__(self, limit: int, window: tuple[int, int] | None) -> None:
        self.limit = limit
        self.window = window
        self.lo, self.hi = window if window is not None else (0, 0)  # not digested
        self.in_window = 0
        self.calls: list[tuple[int, int, Any, int]] = []  # (step, salt, device, slot)
        self.buffers: dict[Any, list[torch.Tensor]] = {}  # device -> chunks of int64 slots
        self.used: dict[Any, int] = {}
        self.plans: dict[tuple[Any, ...], tuple[int, torch.Tensor | None, int]] = {}
        self.outside = 0
        self.captured = 0

    def slot(self, device: Any) -> tuple[torch.Tensor, int]:
        """A fresh 0-dim int64 slot on ``device`` (a new chunk when the last is full)."""
        used = self.used.get(device, 0)
        chunks = self.buffers.setdefault(device, [])
        if used == len(chunks) * _CHUNK:
            with torch.inference_mode(False):  # writable in and out of inference mode
                chunks.append(torch.zeros(_CHUNK, dtype=torch.int64, device=device))
        self.used[device] = used + 1
        return chunks[used // _CHUNK][used % _CHUNK], used

    def plan(self, t: torch.Tensor) -> tuple[int, torch.Tensor | None, int]:
        """(word bytes, weights, salt) of tensors like ``t`` (see the module docstring)."""
        key = (t.dtype, t.shape, t.device)
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) > 256:
                self.plans.clear()
            nbytes = t.numel() * t.element_size()
            word = next(w for w in (8, 4, 1) if nbytes % w == 0)
            n = nbytes // word
            weights = None
            if n:
                with torch.inference_mode(False):  # usable in and out of inference mode
                    weights = torch.arange(1, n + 1, dtype=torch.int64, device=t.device)
                    weights.mul_(_SIGNED_GOLDEN).bitwise_or_(1)
            salt = zlib.crc32(f"{t.dtype}:{list(t.shape)}".encode())
            plan = self.plans[key] = (word, weights, salt)
        return plan


_state: _State | None = None


def enable(limit: int, window: tuple[int, int] | None = None) -> None:
    """Digest steps ``0 .. limit-1`` from now on, except those in ``window`` (``[lo, hi)``:
    profplug ab's timed steps); forgets earlier digests."""
    global _state
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if window is not None and not 0 <= window[0] <= window[1]:
        raise ValueError("window must be (lo, hi) with 0 <= lo <= hi")
    _state = _State(limit, window)


def disable() -> None:
    global _state
    _state = None


def enabled() -> bool:
    return _state is not None


def reset() -> None:
    """Forget the digests so far (the step count restarted: a higher step source)."""
    if _state is not None:
        enable(_state.limit, _state.window)


def _words(t: torch.Tensor, word: int) -> torch.Tensor:
    """The bytes of ``t`` as int64 words of ``word`` bytes (8: reinterpreted; 4, 1: widened).
    A view whose bytes do not start on a word boundary is copied first."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    flat = t.contiguous().reshape(-1)
    if (flat.storage_offset() * flat.element_size()) % word:
        flat = flat.clone()
    raw = flat.view(torch.uint8)
    if word == 8:
        return raw.view(torch.int64)
    if word == 4:
        return raw.view(torch.int32).to(torch.int64)
    return raw.to(torch.int64)


def digest(tensor: torch.Tensor) -> None:
    """Fold ``tensor`` into this step's digest (no-op unless digests are enabled)."""
    state = _state
    if state is None:
        return
    step = _steps.count() - 1
    if state.lo <= step < state.hi:  # a timed step: nothing launched, nothing kept
        state.in_window += 1
        return
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
        raise TypeError("profplug.digest takes a dense torch.Tensor")
    if step < 0 or step >= state.limit:
        state.outside += 1
        return
    if tensor.is_cuda and torch.cuda.is_current_stream_capturing():
        state.captured += 1
        return
    word, weights, salt = state.plan(tensor)
    device = tensor.device
    slot, index = state.slot(device)
    if weights is not None:
        words = _words(tensor, word)
        # 8-byte words are the tensor's own memory: multiply into a new tensor
        prod = torch.mul(words, weights) if word == 8 else words.mul_(weights)
        torch.sum(prod, 0, out=slot)
    state.calls.append((step, salt, device, index))


def fold(d: int, value: int) -> int:
    """One step of the digest's fold: ``(d * PRIME + value) mod 2**64``."""
    return (d * PRIME + value) & MASK


def summary(read: bool = True) -> dict[str, Any] | None:
    """The status file's ``digest`` object, or None when off. ``read=False`` (from a
    signal handler): the device values are not read (no CUDA call), only counted."""
    state = _state
    if state is None:
        return None
    out: dict[str, Any] = {"limit": state.limit,
                           "window": list(state.window) if state.window else None,
                           "calls": len(state.calls), "in_window": state.in_window,
                           "outside": state.outside, "captured": state.captured,
                           "steps": None, "digest": None, "error": None}
    if not read:
        out["error"] = "not read (the rank was ending on a signal)"
        return out
    try:
        values = {dev: torch.cat(chunks).tolist() for dev, chunks in state.buffers.items()}
    except Exception as exc:  # never fail the job over its digests
        out["error"] = f"digests unreadable: {exc}"
        return out
    steps: list[int | None] = [None] * (max((c[0] for c in state.calls), default=-1) + 1)
    for step, salt, device, index in state.calls:
        so_far = steps[step]
        start = BASIS if so_far is None else so_far
        steps[step] = (fold(start, values[device][index]) + salt) & MASK
    total = BASIS
    for i, d in enumerate(steps):
        if d is not None:
            total = fold(fold(total, i), d)
    out["steps"] = [None if d is None else f"{d:016x}" for d in steps]
    out["digest"] = f"{total:016x}" if state.calls else None
    return out
