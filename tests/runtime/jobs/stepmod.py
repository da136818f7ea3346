"""The step function of ``stepfn_job.py``, in a module the job imports (CPU test job)."""

from __future__ import annotations

import torch
import torch.distributed as dist


class Decoder:
    def __init__(self, hidden: int) -> None:
        torch.manual_seed(0)
        self.w = torch.randn(hidden, hidden) / hidden**0.5

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        """One pipeline step: rank 0 computes and sends, rank 1 receives and computes; one
        process without a process group computes."""
        if not dist.is_initialized():
            return torch.tanh(x @ self.w)
        if dist.get_rank() == 0:
            y = torch.tanh(x @ self.w)
            dist.send(y, 1)
        else:
            y = torch.empty_like(x)
            dist.recv(y, 0)
            y = torch.tanh(y @ self.w)
        dist.broadcast(y, 1)
        return y


def never_called() -> None:
    """Named by the test with --step-fn, never called by the job."""
