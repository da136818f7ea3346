"""A step module as users write it: imports torch first, then decorators and classes.

The job imports this module *before* it imports torch itself, so profplug's session starts
inside this module's own ``import torch``, while the module is half-built (CPU test job).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist


def logged(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator of the job's own (functools.wraps), as real code has."""
    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    return inner


class Engine:
    def __init__(self, hidden: int) -> None:
        torch.manual_seed(0)
        self.w = torch.randn(hidden, hidden) / hidden**0.5

    @logged
    def step(self, x: torch.Tensor) -> torch.Tensor:
        """One pipeline step: rank 0 computes and sends, rank 1 receives and computes."""
        if dist.get_rank() == 0:
            y = torch.tanh(x @ self.w)
            dist.send(y, 1)
        else:
            y = torch.empty_like(x)
            dist.recv(y, 0)
            y = torch.tanh(y @ self.w)
        dist.broadcast(y, 1)
        return y
