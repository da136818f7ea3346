"""Hostile inputs against what main added since round 2 began (steps from any range, the
comm_* rows, the cross-rank analysis and the what-if run by default): run by
scripts/attacks.py like the builders of ``attack_inputs``."""

from __future__ import annotations

import json
from pathlib import Path

from attack_inputs import Build, kineto_bytes, launch_pairs, write

NCCL = b"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"


def _rank_file(d: Path, rank: int, events: list[bytes]) -> None:
    (d / f"rank{rank}.json").write_bytes(
        kineto_bytes(events).replace(b'"rank": 0,', b'"rank": %d,' % rank))


def param_comms(case: str) -> Build:
    """One record_param_comms whose numbers are no ranks, then a NCCL kernel."""
    args = {"seq and peer 10^30": {"Collective name": "send", "Seq": 10**30,
                                   "Dst Rank": 10**30},
            "group size 10^9": {"Collective name": "broadcast",
                                "Process Group Ranks": "[0, 1, ...]",
                                "Global rank start": 0, "Global rank stride": 1,
                                "Group size": 10**9}}[case]

    def build(d: Path) -> list[str]:
        ev = launch_pairs(10)
        ev.append(b'{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 7, '
                  b'"tid": 1, "ts": 100.0, "dur": 2.0, "args": %s}' % json.dumps(args).encode())
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


def nccl_kernels(n: int) -> Build:
    """Two ranks, n send/recv each: a torch ``nccl:`` range around each NCCL launch."""
    def build(d: Path) -> list[str]:
        for rank, name in ((0, b"nccl:send 0->1"), (1, b"nccl:recv 1<-0")):
            ev = []
            for k in range(n):
                ts = 10.0 * k
                ev.append(b'{"ph": "X", "cat": "user_annotation", "name": "%s", "pid": 7, '
                          b'"tid": 1, "ts": %.3f, "dur": 4.0}' % (name, ts))
                ev.append(b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                          b'"pid": 7, "tid": 1, "ts": %.3f, "dur": 1.0, "args": '
                          b'{"correlation": %d}}' % (ts + 1, 1000 + k))
                ev.append(b'{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, '
                          b'"ts": %.3f, "dur": 5.0, "args": {"device": %d, "stream": 7, '
                          b'"correlation": %d}}' % (NCCL, ts + 2.0, rank, 1000 + k))
            _rank_file(d, rank, ev)
        return ["report", str(d), "--jobs", "1"]
    return build


def many_threads(n: int) -> Build:
    """n host threads, each: a range, a NCCL launch and a sync inside it."""
    def build(d: Path) -> list[str]:
        ev = []
        for k in range(n):
            ts, tid = 20.0 * k, k + 10
            ev.append(b'{"ph": "X", "cat": "user_annotation", "name": "nccl:send 0->1", '
                      b'"pid": 7, "tid": %d, "ts": %.3f, "dur": 8.0}' % (tid, ts))
            ev.append(b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                      b'"pid": 7, "tid": %d, "ts": %.3f, "dur": 1.0, "args": '
                      b'{"correlation": %d}}' % (tid, ts + 1, 1000 + k))
            ev.append(b'{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, '
                      b'"ts": %.3f, "dur": 5.0, "args": {"device": 0, "stream": 7, '
                      b'"correlation": %d}}' % (NCCL, ts + 2.0, 1000 + k))
            ev.append(b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", '
                      b'"pid": 7, "tid": %d, "ts": %.3f, "dur": 7.0}' % (tid, ts + 2))
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


def step_range_digits(d: Path) -> list[str]:
    """--step-range re:step(\\d+) over ranges numbered with 30 digits."""
    ev = launch_pairs(20)
    for k in range(4):
        ev.append(b'{"ph": "X", "cat": "user_annotation", "name": "step%s", "pid": 7, '
                  b'"tid": 1, "ts": %.1f, "dur": 40.0}' % (b"9" * 30, 50.0 * k))
    return [*write(d, "rank0.json", kineto_bytes(ev)), "--step-range", r"re:step(\d+)"]
