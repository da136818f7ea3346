"""The scenarios several test modules share, each a function of its own (times in us, the
answers worked out by hand in each docstring): ``mixed_trace`` (one gap of each host cause),
``sync_loop`` / ``sync_loop_export`` (kernels and device-wide synchronizes, no step ranges;
Kineto / Nsight), ``run_folder`` (a sync loop in a ``profplug run`` folder beside its
run.json), ``write_run`` / ``build_rank`` (compare's device-sync and event-sync runs of two
ranks), ``planted_trace`` (one planted long step), ``two_ranks`` (a send and its recv, for the
what-if), ``nested`` (host calls nested in others), ``nsys_ring`` (three ranks of one Nsight
export in a ring)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from synth.kineto import KinetoTrace
from synth.nsys import NsysExport
from synth.recorder import Recorder

NCCL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


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


def _loop(t: Recorder, n: int) -> None:
    for k in range(n):
        t.launch(100.0 * k, 100.0 * k + 2, 50.0)
        t.runtime("cudaDeviceSynchronize", 100.0 * k + 3, 60.0)


def sync_loop(path: Path, rank: int | None = 0, n: int = 10) -> Path:
    """``n`` steps of a 50 us kernel and a device-wide synchronize (no step ranges)."""
    t = KinetoTrace(rank=rank)
    _loop(t, n)
    return t.write(path)


def sync_loop_export(path: Path, n: int = 5) -> Path:
    """``sync_loop`` as Nsight records it: an export at ``path`` of one process (no rank
    mark)."""
    p = NsysExport().process()
    _loop(p, n)
    return p.write(path)


def run_folder(tmp: Path) -> tuple[Path, Path]:
    """A ``profplug run`` folder ``tmp/run``: its run.json (world size 1 and a note) and one
    ``sync_loop`` trace, kineto/rank0.json; (the folder, the trace)."""
    run = tmp / "run"
    (run / "kineto").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"world_size": 1, "note": "keep me"}))
    return run, sync_loop(run / "kineto" / "rank0.json")


# ---------------------------------------------------------------- compare's two runs
# Each step of each rank: a step range ``ProfilerStep#k`` [t0, t0+P) on the host; a compute
# kernel at GPU t0+2 (50 us) and a NCCL kernel at t0+52 (20 us), so the GPU is busy
# t0+2 .. t0+72 and idle until the next step's first kernel at t0+P+2 (gap P-70 us).
# - ``device`` run (P = 100): a ``cudaDeviceSynchronize`` [t0+5, t0+75] inside
#   ``profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device`` holds every gap
#   start: each gap (30 us) is device_sync idle.
# - ``event`` run (P = 80): rank 0 is host-bound (gap 10 us), rank 1 blocks in
#   ``cudaEventSynchronize`` [t0+5, t0+75]: each 10 us gap is event_sync idle.
# With N steps a rank has N-1 gaps (the window ends with the last kernel).
N_STEPS = 5
PERIOD = {"device": 100.0, "event": 80.0}
RECV = "profplug.recv_from_prev_pipeline_rank_"


def build_rank(kind: str, rank: int, kernel: str = "gemm_kernel",
               annotation: str = RECV, n_steps: int = N_STEPS, t0: float = 1000.0,
               tr: Any = None) -> Any:
    """One rank of the ``device`` or ``event`` run (above), recorded into ``tr`` (a
    ``KinetoTrace`` by default; any ``Recorder``)."""
    tr = KinetoTrace(rank=rank, pid=4000 + rank) if tr is None else tr
    p = PERIOD[kind]
    for k in range(n_steps):
        t = t0 + k * p
        tr.annotation(f"ProfilerStep#{k}", t, p)
        tr.launch(at=t + 1, start=t + 2, dur=50, name=kernel, api_dur=1)
        tr.launch(at=t + 3, start=t + 52, dur=20, name="ncclDevKernel_SendRecv(x)", stream=9,
                  api_dur=1)
        if kind == "device":
            tr.annotation(annotation, t + 4, 72)
            tr.annotation("profplug.sync.device", t + 4.5, 71)
            tr.runtime("cudaDeviceSynchronize", t + 5, 70)
        elif rank == 1:
            tr.annotation(annotation, t + 4, 72)
            tr.annotation("profplug.sync.event", t + 4.5, 71)
            tr.runtime("cudaEventSynchronize", t + 5, 70)
        else:
            tr.runtime("cudaEventQuery", t + 5, 1)
    return tr


def write_run(root: Path, kind: str, n_ranks: int = 2, **kw: Any) -> Path:
    """A run directory ``root/<kind>`` with one Kineto trace per rank."""
    d = root / kind
    d.mkdir(parents=True, exist_ok=True)
    for r in range(n_ranks):
        build_rank(kind, r, **kw).write(d / f"rank{r}.json")
    return d


# ---------------------------------------------------------------- one planted long step
# PLANTED_STEPS steps of PLANTED_PERIOD = 100 us as in compare's device run (compute 50 us at
# t+2, NCCL 20 us at t+52, a ``cudaDeviceSynchronize`` [t+5, t+75] inside the recv from
# rank 1, so each step has a 30 us device_sync gap, t+72 .. t+102); the step at index
# PLANTED_AT waits PLANTED_STALL us longer in its synchronize: its period is 5,100 us, its
# gap 5,030 us.
PLANTED_STEPS, PLANTED_PERIOD, PLANTED_AT, PLANTED_STALL = 9, 100.0, 4, 5_000.0
PLANTED_RECV = "profplug.recv_from_prev_pipeline_rank_ peer=1"


def planted_step(tr: KinetoTrace, k: int, t: float, sync_us: float = 70.0,
                 p: float = PLANTED_PERIOD) -> None:
    """Step number ``k`` at ``t``: its synchronize ``sync_us`` long, its period ``p``."""
    tr.annotation(f"ProfilerStep#{k}", t, p)
    tr.launch(at=t + 1, start=t + 2, dur=50)
    tr.launch(at=t + 3, start=t + 52, dur=20, name="ncclDevKernel_SendRecv(x)", stream=9)
    tr.annotation(PLANTED_RECV, t + 4, sync_us + 2)
    tr.annotation("profplug.sync.device", t + 4.5, sync_us + 1)
    tr.runtime("cudaDeviceSynchronize", t + 5, sync_us)


def planted_trace(rank: int = 0, first: int = 0, planted: bool = True) -> KinetoTrace:
    """The steps (numbered from ``first``), the one at PLANTED_AT long when ``planted``."""
    tr = KinetoTrace(rank=rank, pid=4000 + rank)
    t = 1000.0
    for k in range(PLANTED_STEPS):
        stall = PLANTED_STALL if planted and k == PLANTED_AT else 0.0
        planted_step(tr, first + k, t, 70.0 + stall, PLANTED_PERIOD + stall)
        t += PLANTED_PERIOD + stall
    return tr


# ---------------------------------------------------------------- the what-if's scenarios


def two_ranks(tmp: Path, skew: float = 0.0) -> list[Path]:
    """Rank 0: C (100 us) then a send; rank 1: a recv then D (50 us); transfer 10 us. Each
    step ends with a ``cudaDeviceSynchronize`` that returns 5 us after the GPU drains.

    ``skew``: rank 1's clock reads this much later than rank 0's.
    """
    r0, r1 = KinetoTrace(rank=0), KinetoTrace(rank=1)
    r0.annotation("ProfilerStep#0", 0, 130)
    r0.annotation("ProfilerStep#1", 130, 130)
    r1.annotation("ProfilerStep#0", 0, 180)
    r1.annotation("ProfilerStep#1", 180, 130)
    # rank 0: C at T+5, its NCCL kernel waits for C (stream wait, no GPU record)
    for T, c_start in ((0.0, 5.0), (130.0, 135.0)):
        r0.launch(T, c_start, 100.0, name="compute_c", stream=7)
        r0.runtime("cudaStreamWaitEvent", T + 2, 1.0)
        r0.launch(T + 4, c_start + 100, 10.0, name=NCCL, stream=20)
        r0.runtime("cudaDeviceSynchronize", T + 6, c_start + 115 - (T + 6))
    # rank 1: recv at T+5 runs until the pair completes; D waits for the recv
    for T, r_end in ((0.0, 115.0), (180.0, 245.0)):
        r1.launch(T, T + 5, r_end - T - 5, name=NCCL, stream=20)
        r1.runtime("cudaStreamWaitEvent", T + 2, 1.0)
        r1.launch(T + 4, r_end, 50.0, name="compute_d", stream=7)
        r1.runtime("cudaDeviceSynchronize", T + 6, r_end + 55 - (T + 6))
    for ev in r1.events:
        ev["ts"] += skew
    return [r0.write(tmp / "r0.json"), r1.write(tmp / "r1.json")]


def nested(t: Any, steps: int = 3) -> None:
    """Steps of 100 us on one stream, recorded into ``t`` (any ``Recorder``): a cudaLaunchKernel [T, T+4] whose kernel (T+5..T+65) is
    launched by the driver call nested in it (cuLaunchKernelEx [T+1, T+3], same
    correlation); a cudaDeviceSynchronize [T+6, T+70] with a nested cuCtxSynchronize; host
    work until T+100."""
    for i in range(steps):
        T = 100.0 * i
        t.annotation(f"ProfilerStep#{i}", T, 100.0)
        c = t.runtime("cudaLaunchKernel", T, 4.0)
        t.runtime("cuLaunchKernelEx", T + 1, 2.0, corr=c, cat="cuda_driver")
        t.gpu(T + 5, 60.0, corr=c)
        t.runtime("cudaDeviceSynchronize", T + 6, 64.0)
        t.runtime("cuCtxSynchronize", T + 7, 62.0, cat="cuda_driver")


def nsys_ring(path: Path, *, profplug_names: bool, compute: bool = False) -> Path:
    """Three processes in one Nsight export at ``path``, a ring 0 -> 1 -> 2 -> 0 of one
    send/recv each: described by profplug's NVTX ranges (peer in the name), or only by
    NCCL's own NVTX ranges with their payload exported as JSON; ``compute``: a compute
    kernel launched before each NCCL kernel. Rank 2's send (30) waits for rank 0's recv
    (40); 0 -> 1 and 1 -> 2 start together."""
    from profplug.analyzers.core import ranges

    ex = NsysExport()
    starts = {0: (10, 40), 1: (20, 10), 2: (30, 20)}  # rank: (send start, recv start)
    for r in range(3):
        p = ex.process(100 + r)
        p.rank_mark(r)
        for kind, peer, at, start in (("send", (r + 1) % 3, 0, starts[r][0]),
                                      ("recv", (r - 1) % 3, 5, starts[r][1])):
            end = max(start, starts[peer][1] if kind == "send" else starts[peer][0]) + 10
            if compute:
                p.launch(at, at + 1, 1.0)
            if profplug_names:
                base = ranges.SEND if kind == "send" else ranges.RECV
                p.annotation(ranges.p2p_range(base, peer), at, 4, domain=1)
            else:
                p.annotation(f"nccl{kind.capitalize()}", at, 1, domain=2,
                             json_text=f'{{"Peer rank": {peer}}}')
            p.launch(at + 2, start, end - start, name=NCCL, stream=20)
    return ex.write(path)

