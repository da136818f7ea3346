"""A one-process loop run as ``python -m shapes_main`` or ``python shapes_main.py``: its
steps are its own ``decode`` calls (``helper`` is called inside each). Never imports
profplug (CPU test job).

    python -m shapes_main --tokens 5
"""

from __future__ import annotations

import argparse

import torch

W = torch.eye(8)


def helper(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ W)


def decode(x: torch.Tensor) -> torch.Tensor:
    return helper(x) + 1.0


def never_called() -> None:
    """Named by a test, never called."""


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=5)
    args = ap.parse_args()
    x = torch.ones(2, 8)
    for _ in range(args.tokens):
        x = decode(x)
    print(f"sum {x.sum().item():.6f}")
