"""A Kineto (torch.profiler) trace of one rank, built event by event (times in us)."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_NS = 1_764_000_000_000_000_000


@dataclass
class KinetoTrace:
    rank: int | None = 0
    epoch_us: bool = False  # older torch: integer epoch microseconds, no base
    pid: int = 4242
    events: list[dict[str, Any]] = field(default_factory=list)
    _corr: int = 100

    def _ts(self, us: float) -> float | int:
        if self.epoch_us:
            return int(BASE_NS // 1000 + us)
        return us

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def runtime(self, name: str, start: float, dur: float, tid: int = 1,
                corr: int | None = None, cat: str = "cuda_runtime") -> int:
        corr = self.next_corr() if corr is None else corr
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": self.pid,
                            "tid": tid, "ts": self._ts(start), "dur": dur,
                            "args": {"correlation": corr}})
        return corr

    def gpu(self, start: float, dur: float, name: str = "gemm_kernel", stream: int = 7,
            device: int = 0, corr: int = -1, cat: str = "kernel") -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": device,
                            "tid": stream, "ts": self._ts(start), "dur": dur,
                            "args": {"device": device, "stream": stream, "correlation": corr}})

    def launch(self, at: float, start: float, dur: float, name: str = "gemm_kernel",
               stream: int = 7, device: int = 0, tid: int = 1, api_dur: float = 1.0) -> int:
        """A cudaLaunchKernel at host time ``at`` and its kernel at GPU time ``start``."""
        corr = self.runtime("cudaLaunchKernel", at, api_dur, tid=tid)
        self.gpu(start, dur, name, stream, device, corr)
        return corr

    def annotation(self, name: str, start: float, dur: float, tid: int = 1) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name,
                            "pid": self.pid, "tid": tid, "ts": self._ts(start), "dur": dur})

    def cpu_op(self, name: str, start: float, dur: float, args: dict[str, Any],
               tid: int = 1) -> None:
        """A ``cpu_op`` event (e.g. torch's ``record_param_comms`` with its args)."""
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": self.pid,
                            "tid": tid, "ts": self._ts(start), "dur": dur, "args": args})

    def cuda_sync(self, kind: str, start: float, dur: float, stream: int = 7, device: int = 0,
                  corr: int = -1, wait_on_stream: int | None = None,
                  wait_corr: int | None = None) -> None:
        args: dict[str, Any] = {"cuda_sync_kind": kind, "stream": stream, "device": device,
                                "correlation": corr}
        if wait_on_stream is not None:
            args["wait_on_stream"] = wait_on_stream
        if wait_corr is not None:
            args["wait_on_cuda_event_record_corr_id"] = wait_corr
        self.events.append({"ph": "X", "cat": "cuda_sync", "name": kind, "pid": device,
                            "tid": stream, "ts": self._ts(start), "dur": dur, "args": args})

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [],
                             "traceEvents": self.events}
        if self.rank is not None:
            d["distributedInfo"] = {"backend": "nccl", "rank": self.rank, "world_size": 2}
        if not self.epoch_us:
            d["baseTimeNanoseconds"] = BASE_NS
        return d

    def to_json(self) -> str:
        """The document as torch writes it, one event per line, through ``json``'s C encoder
        (an ``indent`` would take its pure-Python one; the suite writes ~1,400 traces)."""
        events = "[\n  " + ",\n  ".join(json.dumps(e) for e in self.events) + "\n]"
        return "{" + ", ".join(f"{json.dumps(k)}: " + (events if k == "traceEvents" else
                                                     json.dumps(v))
                               for k, v in self.to_dict().items()) + "}"

    def write(self, path: Path) -> Path:
        data = self.to_json().encode()
        if path.name.endswith(".gz"):
            data = gzip.compress(data)
        path.write_bytes(data)
        return path
