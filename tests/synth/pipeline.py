"""Synthetic N-stage pipeline decode loops (one trace per rank, Kineto or Nsight:
``PipelineSpec.fmt``) with exact answers.

Every rank runs, per step: recv from the previous stage (stage 0: the token from the last
stage, from step 1 on), ``layers`` compute kernels, send to the next stage (the last stage
sends the token back to stage 0). With ``tp`` > 1 each stage is a tensor-parallel group of
``tp`` ranks (rank = stage * tp + t; sends go to the same t of the next stage) that
all-reduces once in the middle of its layers (a NCCL kernel described by torch's
``record_param_comms``, with ``Seq`` when ``coll_seq``). Each send/recv as profplug's p2p does it
(``cudaStreamWaitEvent``, the NCCL launch, ``req.wait()``'s ``cudaStreamWaitEvent``, then a
``cudaDeviceSynchronize`` for ``sync="device"`` or an event record for ``"event"``).

Timing rules (us), the ones the what-if model assumes, so the trace is self-consistent:
a kernel starts at ``max(launch + latency, its stream ready, what it waits for)``; a NCCL
pair ends ``xfer_us`` after the later of its two starts, on both ranks; a device-wide
synchronize returns ``wake_us`` after the rank's GPU drained. The generator records the
exact answers: per rank, each NCCL kernel's peer wait (``max(0, peer start - own start)``)
and transfer (``xfer_us``), its busy time and GPU window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from profplug.analyzers.core import ranges

from synth.kineto import KinetoTrace
from synth.nsys import NsysProcess
from synth.recorder import SUFFIX, Format, rank_trace
from synth.scenarios import NCCL

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_STREAM, NCCL_STREAM = 7, 20


@dataclass
class PipelineSpec:
    stages: int = 4
    steps: int = 6
    layers: int = 4
    kernel_us: float = 20.0
    slow_stage: int | None = None
    slow_factor: float = 3.0
    launch_us: float = 5.0  # host time per compute launch
    latency_us: float = 4.0  # launch -> earliest GPU start
    xfer_us: float = 10.0
    wake_us: float = 5.0
    sync: str = "device"  # device | event
    peer_in_name: bool = True  # profplug ranges with peer=R (False: older, bare names)
    host_us: float = 10.0  # host work after each p2p op
    tp: int = 1  # ranks per stage (tensor parallel), all-reducing once per step
    coll_seq: bool = True  # the all-reduce's record_param_comms carries its Seq
    slow_host_stage: int | None = None  # this stage's host takes slow_factor x per launch
    after_send_us: float = 0.0  # extra host work after each send of rank after_send_rank
    after_send_rank: int = 0
    fmt: Format = "kineto"  # nsys: one export per rank (tp = 1: no record_param_comms there)


@dataclass
class Truth:
    """Exact answers per rank (us)."""

    wait_us: float = 0.0
    transfer_us: float = 0.0
    busy_us: float = 0.0
    first_us: float = float("inf")
    last_us: float = 0.0
    waits_for: dict[int, float] = field(default_factory=dict)

    @property
    def window_us(self) -> float:
        return self.last_us - self.first_us

    @property
    def idle_us(self) -> float:
        return self.window_us - self.busy_us


@dataclass
class _Pending:
    kind: str
    peer: int
    h0: float
    start: float
    corr: int


class _Rank:
    def __init__(self, rank: int, spec: PipelineSpec) -> None:
        self.rank, self.spec = rank, spec
        self.t = rank_trace(spec.fmt, rank, 1000 + rank)
        self.h = 0.0  # host
        self.g = 0.0  # compute stream ready
        self.n = 0.0  # NCCL stream ready
        self.truth = Truth()

    def _gpu(self, start: float, dur: float) -> None:
        tr = self.truth
        tr.busy_us += dur
        tr.first_us = min(tr.first_us, start)
        tr.last_us = max(tr.last_us, start + dur)

    def forward(self, layers: int) -> None:
        sp = self.spec
        slow = self.rank // sp.tp == sp.slow_stage
        dur = sp.kernel_us * (sp.slow_factor if slow else 1.0)
        for _ in range(layers):
            start = max(self.h + sp.latency_us, self.g)
            self.t.launch(self.h, start, dur, name="gemm_kernel", stream=COMPUTE_STREAM)
            self._gpu(start, dur)
            slow_host = self.rank // sp.tp == sp.slow_host_stage
            self.h += self.spec.launch_us * (sp.slow_factor if slow_host else 1.0)
            self.g = start + dur

    def post(self, kind: str, peer: int) -> _Pending:
        h0 = self.h
        self.t.runtime("cudaStreamWaitEvent", h0 + 1, 1.0)  # NCCL stream waits for compute
        corr = self.t.runtime("cudaLaunchKernel", h0 + 2, 3.0)
        start = max(h0 + 2 + self.spec.latency_us, self.n, self.g)
        self.t.runtime("cudaStreamWaitEvent", h0 + 6, 1.0)  # req.wait(): compute waits
        return _Pending(kind, peer, h0, start, corr)

    def all_reduce(self, group: list[int], seq: int) -> _Pending:
        """Post a TP all-reduce (described by record_param_comms); no host sync after it."""
        args: dict[str, object] = {"Collective name": "allreduce", "Group size": len(group),
                                   "Process Group Ranks": str(group), "Rank": 0}
        if self.spec.coll_seq:
            args["Seq"] = seq
        assert isinstance(self.t, KinetoTrace), "an all-reduce is described in Kineto only"
        self.t.cpu_op("record_param_comms", self.h, 1.0, args)
        p = self.post("allreduce", -1)
        self.h += 8.0
        return p

    def finish_coll(self, p: _Pending, end: float, last_start: float, last: int) -> None:
        self.t.gpu(p.start, end - p.start, ALL_REDUCE, stream=NCCL_STREAM, corr=p.corr)
        self._gpu(p.start, end - p.start)
        wait = max(0.0, last_start - p.start)
        self.truth.wait_us += wait
        self.truth.transfer_us += end - p.start - wait
        if wait:
            self.truth.waits_for[last] = self.truth.waits_for.get(last, 0.0) + wait
        self.n = end
        self.g = max(self.g, end)

    def finish(self, p: _Pending, end: float, peer_start: float) -> None:
        sp = self.spec
        self.t.gpu(p.start, end - p.start, NCCL, stream=NCCL_STREAM, corr=p.corr)
        self._gpu(p.start, end - p.start)
        wait = max(0.0, peer_start - p.start)
        self.truth.wait_us += wait
        self.truth.transfer_us += end - p.start - wait
        if wait:
            self.truth.waits_for[p.peer] = self.truth.waits_for.get(p.peer, 0.0) + wait
        self.n = end
        self.g = max(self.g, end)
        if sp.sync == "device":
            s0 = p.h0 + 8
            done = max(self.g, self.n)
            s_end = max(s0 + 2.0, done + sp.wake_us)
            self.t.runtime("cudaDeviceSynchronize", s0, s_end - s0)
            self.h = s_end + sp.host_us
        else:
            self.t.runtime("cudaEventRecord", p.h0 + 8, 1.0)
            self.h = p.h0 + 9 + sp.host_us
        base = ranges.SEND if p.kind == "send" else ranges.RECV
        name = ranges.p2p_range(base, p.peer) if sp.peer_in_name else base
        self.t.annotation(name, p.h0, self.h - 1 - p.h0)
        if p.kind == "send" and self.rank == sp.after_send_rank:
            self.h += sp.after_send_us


def pipeline(spec: PipelineSpec) -> tuple[list[KinetoTrace | NsysProcess], list[Truth]]:
    """The traces of every rank and the exact answers (see the module docstring)."""
    n, tp = spec.stages, spec.tp
    rs = [_Rank(r, spec) for r in range(n * tp)]
    sends: dict[int, _Pending] = {}
    starts: list[list[float]] = [[] for _ in rs]

    def recv(i: int) -> None:
        stage, t = divmod(i, tp)
        src = (stage - 1 if stage > 0 else n - 1) * tp + t
        pr = rs[i].post("recv", src)
        ps = sends.pop(src)
        end = max(ps.start, pr.start) + spec.xfer_us
        rs[src].finish(ps, end, pr.start)
        rs[i].finish(pr, end, ps.start)

    half = spec.layers // 2 if tp > 1 else spec.layers
    for k in range(spec.steps):
        for stage in range(n):
            group = list(range(stage * tp, stage * tp + tp))
            posted = {}
            for i in group:
                starts[i].append(rs[i].h)
                if stage or k:
                    recv(i)
                rs[i].forward(half)
                if tp > 1:
                    posted[i] = rs[i].all_reduce(group, k)
            if posted:
                last = max(group, key=lambda i: (posted[i].start, -i))
                end = posted[last].start + spec.xfer_us
                for i in group:
                    rs[i].finish_coll(posted[i], end, posted[last].start, last)
            for i in group:
                rs[i].forward(spec.layers - half)
                nxt = ((stage + 1) % n) * tp + i % tp
                sends[i] = rs[i].post("send", nxt)
    last0 = [rs[t].h for t in range(tp)]
    for t in range(tp):
        recv(t)  # the last token, outside the steps: completes the last stage's sends
    for i, r in enumerate(rs):
        ends = [*starts[i][1:], last0[i] if i < tp else r.h]
        for k, (a, b) in enumerate(zip(starts[i], ends, strict=True)):
            r.t.annotation(f"ProfilerStep#{k}", a, b - a)
    return [r.t for r in rs], [r.truth for r in rs]


def write(spec: PipelineSpec, out: Path) -> tuple[list[Path], list[Truth]]:
    """Every rank's trace, ``out/rank<r>.json`` (or ``.sqlite``), and the exact answers."""
    traces, truth = pipeline(spec)
    out.mkdir(parents=True, exist_ok=True)
    suffix = SUFFIX[spec.fmt]
    return [t.write(out / f"rank{r}{suffix}") for r, t in enumerate(traces)], truth
