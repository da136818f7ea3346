"""Builders of the hostile inputs of issue #40 (robustness, round 4), items 8, 10-13, 15, 17,
25, for scripts/attacks.py: each writes its input into a directory and returns the
``profplug`` arguments."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from attack_inputs import ROOT
from synth import KinetoTrace, NsysExport

Build = Callable[[Path], list[str]]
I64_MAX = 2**63 - 1


# ------------------------------------------------------------------- 8: NVTX ranges
def nvtx_step(case: str) -> Build:
    bad = {"ends at 2^63-1": (50_000, I64_MAX), "spans -2^63..2^63-1": (-(2**63), I64_MAX),
           "10 hours long": (0, 10 * 3600 * 10**9)}[case]

    def build(d: Path) -> list[str]:
        ex = NsysExport()
        p = ex.process()
        for k in range(4):
            p.annotation("profplug.step", 100.0 * k, 90.0)
            p.launch(100.0 * k + 1, 100.0 * k + 5, 50.0)
        ex.rows["NVTX_EVENTS"].append(
            (bad[0], bad[1], 59, None, None, None, "profplug.step", (4242 << 24) | 1, None,
             None, 0, None, None, None, None, None, None, None, None))
        ex.write(d / "r.sqlite")
        return ["report", str(d / "r.sqlite"), "-f", "json", "--jobs", "1"]
    return build


# ------------------------------------------------------------------- 10-12: Kineto oddities
def kineto_steps(case: str) -> Build:
    def build(d: Path) -> list[str]:
        t = KinetoTrace()
        shift = -2 * 3600e6 if case == "GPU clock 2 h early" else 0.0
        for k in range(5):
            t.annotation(f"ProfilerStep#{k}", 100.0 * k, 100.0)
            t.launch(100.0 * k + 1, 100.0 * k + 5 + shift, 60.0)
            t.runtime("cudaDeviceSynchronize", 100.0 * k + 3, 62.0)
        for e in t.events:
            args = e.get("args")
            if not isinstance(args, dict):
                continue
            if case == "kernel args.device \"0\"" and e["cat"] == "kernel":
                args["device"] = "0"
            elif case == "kernel args.stream \"7\"" and e["cat"] == "kernel":
                args["stream"] = "7"
            elif case == "one correlation id for all" and "correlation" in args:
                args["correlation"] = 7
        t.write(d / "rank0.json")
        return ["report", str(d / "rank0.json"), "-f", "json", "--jobs", "1"]
    return build


# ------------------------------------------------------------------- 13, 17: --dask
def dask_address(address: str) -> Build:
    def build(d: Path) -> list[str]:
        _small(d)
        target = address
        if address == "silent server":  # accepts, never answers (this process, loopback)
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen(8)
            held: list[socket.socket] = []
            threading.Thread(target=lambda: [held.append(srv.accept()[0]) for _ in range(64)],
                             daemon=True).start()
            target = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
        elif address.startswith("file:"):
            body = address[5:]
            if body != "missing":
                (d / "scheduler.json").write_text(body)
            target = str(d / "scheduler.json")
        return ["report", str(d / "rank0.json"), "--dask", target]
    return build


def _small(d: Path) -> None:
    t = KinetoTrace()
    for k in range(5):
        t.launch(100.0 * k + 1, 100.0 * k + 5, 60.0)
    t.write(d / "rank0.json")


# ------------------------------------------------------------------- 15: the window's barrier
def send_only_on_rank0(d: Path) -> list[str]:
    job = ROOT / "tests" / "runtime" / "jobs" / "send_job.py"
    return ["run", "-o", str(d / "o"), "--skip", "1", "--steps", "3", "--no-report",
            "--step-fn", "torch.distributed:send", "--", sys.executable, "-m",
            "torch.distributed.run", "--nproc-per-node", "2", str(job), "--tokens", "6"]


# ------------------------------------------------------------------- 25: mixed sources
def mixed_sources(d: Path) -> list[str]:
    t = KinetoTrace(rank=0)
    for k in range(10):
        t.launch(100.0 * k, 100.0 * k + 2, 50.0)
    t.write(d / "rank0.json")
    ex = NsysExport()
    p = ex.process()
    p.rank_mark(1)
    for k in range(10):
        p.launch(100.0 * k, 100.0 * k + 2, 50.0)
    ex.write(d / "rank1.sqlite")
    return ["report", str(d), "-f", "json", "--jobs", "1"]
