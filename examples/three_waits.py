"""Single GPU: the three host waits side by side, one of each per step.

Each step runs a chain of matmuls, then
1. ``torch.cuda.synchronize()`` (cudaDeviceSynchronize: the host blocks, the whole GPU drains),
2. ``event.synchronize()`` after work on the main stream (cudaEventSynchronize: the host
   blocks until that event, other streams keep running) and ``stream.synchronize()``
   (cudaStreamSynchronize),
3. ``main.wait_event(event)`` on work from a side stream (cudaStreamWaitEvent: the host does
   not block; only the main stream waits on the GPU).

Run it under ``profplug run -o runs/waits -- python examples/three_waits.py``; each wait sits
in its own ``three_waits.*`` range so the report names its call site.
"""

from __future__ import annotations

import argparse
import sys

import torch

import profplug


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2048, help="rows: big enough that the GPU, "
                    "not the host, sets the pace, so each wait really waits")
    ap.add_argument("--chain", type=int, default=6, help="matmuls between waits")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("three_waits.py needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    w = torch.randn(args.hidden, args.hidden, device=dev) / args.hidden**0.5
    x = torch.randn(args.batch, args.hidden, device=dev)
    side = torch.cuda.Stream(device=dev)
    main_stream = torch.cuda.current_stream(dev)
    ev = torch.cuda.Event()

    def chain(t: torch.Tensor) -> torch.Tensor:
        for _ in range(args.chain):
            t = torch.tanh(t @ w)
        return t

    checksum = 0.0
    for _ in range(args.steps):
        with profplug.step():
            x = chain(x)
            with profplug.annotate("three_waits.device_sync"):
                torch.cuda.synchronize()
            x = chain(x)
            with profplug.annotate("three_waits.event_sync"):
                ev.record(main_stream)
                ev.synchronize()
            x = chain(x)
            with profplug.annotate("three_waits.stream_sync"):
                main_stream.synchronize()
            side.wait_stream(main_stream)
            with torch.cuda.stream(side):
                y = chain(x)
                ev.record(side)
            with profplug.annotate("three_waits.stream_wait_event"):
                main_stream.wait_event(ev)
            y.record_stream(main_stream)
            x = chain(x + y)
    checksum = float(x.float().sum().item())
    print(f"three_waits: {args.steps} steps, checksum {checksum:.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
