"""The one way a synthetic rank's events are described: the recording methods of
:class:`Recorder` (times in us). What records them decides the format: a
:class:`~synth.kineto.KinetoTrace` writes a Kineto trace, a
:class:`~synth.nsys.NsysProcess` one process of an Nsight Systems export.
:func:`rank_trace` gives an empty one of either format for one rank."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from synth.kineto import KinetoTrace
from synth.nsys import NsysExport, NsysProcess

Format = Literal["kineto", "nsys"]
SUFFIX: dict[str, str] = {"kineto": ".json", "nsys": ".sqlite"}


class Recorder(Protocol):
    def runtime(self, name: str, start: float, dur: float, tid: int = 1,
                corr: int | None = None, cat: str = "cuda_runtime") -> int:
        """A CUDA runtime (or, ``cat="cuda_driver"``, driver) call; its correlation id."""
        ...

    def gpu(self, start: float, dur: float, name: str = "gemm_kernel", stream: int = 7,
            device: int = 0, corr: int = -1, cat: str = "kernel") -> None:
        """A GPU op: ``kernel``, ``gpu_memcpy`` or ``gpu_memset``."""
        ...

    def launch(self, at: float, start: float, dur: float, name: str = "gemm_kernel",
               stream: int = 7, device: int = 0, tid: int = 1, api_dur: float = 1.0) -> int:
        """A cudaLaunchKernel at host time ``at`` and its kernel at GPU time ``start``."""
        ...

    def annotation(self, name: str, start: float, dur: float, tid: int = 1) -> None:
        """A host range (a Kineto user annotation, an NVTX push/pop range)."""
        ...

    def cuda_sync(self, kind: str, start: float, dur: float, stream: int = 7, device: int = 0,
                  corr: int = -1, wait_on_stream: int | None = None,
                  wait_corr: int | None = None) -> None:
        """A GPU-side synchronization record (``Context Sync``, ``Stream Wait Event``...)."""
        ...

    def write(self, path: Path) -> Path:
        """The trace file at ``path``."""
        ...


def rank_trace(fmt: Format, rank: int, pid: int) -> KinetoTrace | NsysProcess:
    """An empty trace of ``rank`` (process ``pid``) in ``fmt``: a Kineto trace whose
    distributedInfo names the rank, or an Nsight export of that one process, marked with the
    rank as the plugin marks it."""
    if fmt == "kineto":
        return KinetoTrace(rank=rank, pid=pid)
    proc = NsysExport().process(pid)
    proc.rank_mark(rank)
    return proc

