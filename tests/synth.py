"""Build synthetic Kineto traces with exactly known answers (times given in us)."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import Report

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

    def write(self, path: Path) -> Path:
        data = json.dumps(self.to_dict(), indent=1).encode()
        if path.name.endswith(".gz"):
            data = gzip.compress(data)
        path.write_bytes(data)
        return path


def mixed_trace(epoch_us: bool = False) -> KinetoTrace:
    """One gap of each host cause: device_sync 6 us, host_bound 5 us, event_sync 3 us."""
    t = KinetoTrace(rank=0, epoch_us=epoch_us)
    t.launch(0, 0, 10)  # GPU busy 0-10
    t.annotation("profplug.recv_from_prev_pipeline_rank_", 4, 10)
    t.annotation("profplug.sync.device", 5, 8)
    t.runtime("cudaDeviceSynchronize", 5, 7)  # host blocked 5-12; GPU idles from 10
    t.launch(15, 16, 4)  # gap 10-16 -> device_sync
    t.launch(20, 25, 5)  # gap 20-25 -> host_bound
    t.runtime("cudaStreamSynchronize", 28, 3)  # host blocked 28-31; GPU idles from 30
    t.launch(32, 33, 2)  # gap 30-33 -> event_sync
    return t


def check_sums(rep: Report) -> None:
    """The invariants every report must satisfy."""
    import pytest

    for r in rep.ranks:
        for d in r.devices:
            g = d.gpu
            assert sum(d.idle_by_cause_us.values()) == pytest.approx(g.idle_us, abs=1e-6)
            assert g.busy_us + g.idle_us == pytest.approx(g.window_us, abs=1e-6)
            assert g.compute_us + g.comm_us == pytest.approx(g.busy_us, abs=1e-6)


def sync_loop(path: Path, rank: int | None = 0, n: int = 10) -> Path:
    """``n`` steps of a 50 us kernel and a device-wide synchronize (no step ranges)."""
    t = KinetoTrace(rank=rank)
    for k in range(n):
        t.launch(100.0 * k, 100.0 * k + 2, 50.0)
        t.runtime("cudaDeviceSynchronize", 100.0 * k + 3, 60.0)
    return t.write(path)


def one_error(capsys: Any) -> str:
    """The command's stderr, which must be one ``profplug: error:`` line."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("profplug: error: "), err
    return err[0]
