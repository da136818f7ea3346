"""Synthetic inputs with exactly known answers (times in us), and the checks made on them:
the one module the tests share their inputs through (no test module imports another).

- :class:`KinetoTrace`: a Kineto trace built event by event;
- the scenarios several test modules share, each a function of its own: ``mixed_trace``
  (one gap of each host cause), ``sync_loop`` (kernels and device-wide synchronizes, no
  step ranges), ``run_folder`` (a sync loop in a ``profplug run`` folder beside its
  run.json), ``write_run`` / ``build_rank`` (compare's device-sync and event-sync runs of
  two ranks), ``planted_trace`` (one planted long step), ``two_ranks`` (a send and its
  recv, for the what-if), ``nested`` (host calls nested in others);
- ``ab_runs`` / ``ab_result`` and ``ab_run``: ``profplug ab``'s run records (what ab.json
  holds) and their analysis;
- ``analyze_traces`` / ``check_sums`` (the sum rule every report keeps) and ``one_error``
  (a command's stderr is one error line).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profplug.analyzers.ab import AbResult
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


def run_folder(tmp: Path) -> tuple[Path, Path]:
    """A ``profplug run`` folder ``tmp/run``: its run.json (world size 1 and a note) and one
    ``sync_loop`` trace, kineto/rank0.json; (the folder, the trace)."""
    run = tmp / "run"
    (run / "kineto").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"world_size": 1, "note": "keep me"}))
    return run, sync_loop(run / "kineto" / "rank0.json")


def one_error(capsys: Any) -> str:
    """The command's stderr, which must be one ``profplug: error:`` line."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("profplug: error: "), err
    return err[0]


def analyze_traces(tmp: Path, *traces: KinetoTrace, tol_us: float = 2.0) -> Report:
    """The report of ``traces`` (written to ``tmp/trace<i>.json``), its sum rule checked."""
    from profplug.analyzers.report.analysis import analyze
    from profplug.analyzers.stalls.rank import StallOptions

    paths = [t.write(tmp / f"trace{i}.json") for i, t in enumerate(traces)]
    rep = analyze(paths, StallOptions(tolerance_ns=round(tol_us * 1000)), jobs=1)
    check_sums(rep)
    return rep


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
    ``KinetoTrace`` by default; an ``nsys_synth.NsysProcess`` records the same)."""
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
NCCL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


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
    """Steps of 100 us on one stream, recorded into ``t`` (a :class:`KinetoTrace` or an
    ``nsys_synth.NsysProcess``): a cudaLaunchKernel [T, T+4] whose kernel (T+5..T+65) is
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


# ---------------------------------------------------------------- ab's run records
AB_POLICIES = ["device", "event", "none"]
AB_MEANS = {"device": 2000.0, "event": 1000.0, "none": 990.0}


def ab_runs(rounds: int = 3, policies: list[str] = AB_POLICIES,
            digests: dict[tuple[int, int], list[str]] | None = None,
            failed: set[int] | tuple[int, ...] = (), steps: int = 20) -> list[dict[str, Any]]:
    """The interleaved runs of ``rounds`` rounds, two ranks each, with step times at AB_MEANS
    (+1% per round, +10 us on rank 1, +0..4 us by step) and the same digests, unless
    ``digests[(run, rank)]`` replaces a rank's step digests; runs in ``failed`` failed."""
    runs, k = [], 0
    for r in range(rounds):
        for p in policies:
            ranks = []
            for q in range(2):
                base = AB_MEANS[p] * (1 + 0.01 * r) + 10 * q
                times = [base + (i % 5) for i in range(steps)]
                ranks.append({"rank": q, "status": "finished", "clock": "cuda_event",
                              "requested_steps": steps, "step_us": times,
                              "host_step_us": [x + 3 for x in times],
                              "digest": "d", "digest_calls": 22,
                              "step_digests": (digests or {}).get((k, q),
                                                                  [f"{q}-{i}" for i in range(22)])})
            bad = k in failed
            runs.append({"index": k, "round": r, "policy": p,
                         "status": "failed" if bad else "ok", "exit_status": 1 if bad else 0,
                         "reasons": ["rank 1: exception: RuntimeError: boom"] if bad else [],
                         "ranks": ranks})
            k += 1
    return runs


def ab_result(runs: list[dict[str, Any]], rounds: int = 3, policies: list[str] = AB_POLICIES,
              **kw: Any) -> AbResult:
    """``analyze_ab`` of ``runs`` as ``profplug ab`` would (2 steps skipped of 20)."""
    from profplug.analyzers.ab import analyze_ab

    return analyze_ab(runs, policies=policies, rounds=rounds, skip=2, steps=20,
                      command=["torchrun", "job.py"], **kw)


def ab_run(k: int, rnd: int, label: str, step_us: list[float], pos: int = 0,
           counts: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """Run ``k`` of round ``rnd`` (policy ``label``, at ``pos`` in its round): one rank,
    its steps from 20 on; ``counts``: the policies' reach counters (``policy_counts``)."""
    rank: dict[str, Any] = {"rank": 0, "status": "finished", "clock": "host",
                            "first_step": 20, "step_us": step_us}
    if counts is not None:
        rank["policy_counts"] = counts
    return {"index": k, "round": rnd, "policy": label, "status": "ok", "exit_status": 0,
            "reasons": [], "position": pos, "ranks": [rank], **extra}
