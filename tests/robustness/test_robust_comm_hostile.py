"""Hostile communication descriptions (the comm_* rows main's cross-rank analysis reads):
numbers beyond int64 or int32, a group size of a billion, peers in range names and NCCL
payloads that are no ranks. Each costs the description at most, never the file, and never
more work than its bytes."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core import ranges
from profplug.analyzers.core.timeline import COMM_COLL, COMM_SEND
from profplug.analyzers.crossrank import cross_rank
from profplug.analyzers.readers.commops import from_range_name, group_members, param_comms
from profplug.analyzers.readers.kineto.decode import Args, decode_item
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.report.analysis import analyze
from synth import KinetoTrace

NCCL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
HUGE = 10**30


def _trace(tmp: Path, args: dict) -> Path:
    t = KinetoTrace(rank=0)
    t.annotation("ProfilerStep#1", 0, 100)
    t.cpu_op("record_param_comms", 10, 2, args)
    t.launch(13, 20, 4, name=NCCL, stream=20)
    t.runtime("cudaDeviceSynchronize", 30, 20)
    t.launch(60, 61, 10)
    return t.write(tmp / "rank0.json")


@pytest.mark.parametrize("args", [
    {"Collective name": "send", "Seq": HUGE, "Dst Rank": 1},
    {"Collective name": "send", "Dst Rank": HUGE},
    {"Collective name": "send", "Rank": 1, "Process Group Ranks": [0, HUGE]},
    {"Collective name": "recv", "Src Rank": "--5", "Seq": "1_0", "Rank": "²"},
    {"Collective name": "broadcast", "Process Group Ranks": "[0, ...]",
     "Global rank start": 0, "Global rank stride": 1, "Group size": 10**9},
    {"Collective name": "broadcast", "Process Group Ranks": "[0, ...]",
     "Global rank start": 2**31 - 2, "Global rank stride": 7, "Group size": 50},
], ids=["seq", "peer", "group member", "odd strings", "billion group", "group past int32"])
def test_hostile_record_param_comms_costs_the_description_only(tmp_path: Path,
                                                               args: dict) -> None:
    # given a rank whose record_param_comms carries numbers that are no ranks / sequences
    path = _trace(tmp_path, args)
    # when reported, cross-rank analysis included
    tracemalloc.start()
    try:
        rep = analyze([path], run=[cross_rank])  # forced: the report's skips one rank
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # then a report with the op kept (kind and name) and the bad numbers dropped, in the
    # memory of a small trace (seen: 2 MiB; a billion-member group would take gigabytes),
    # not a wall-clock bound, which flakes on a shared machine
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MiB"
    assert rep.ranks[0].has_gpu_work
    tl = read_kineto(path)
    assert tl.comm_start_ns.size == 1
    assert (tl.comm_peer >= -1).all() and (tl.comm_peer < 2**31).all()
    assert (np.abs(tl.comm_seq) <= 2**62).all()


def test_a_large_rebuilt_group_is_one_short_name() -> None:
    # given torch's truncated list of a 10^9-rank group (start 3, stride 2)
    args = Args(collective_name="all_reduce", group_ranks="[3, 5, ...]", rank_start=3,
                rank_stride=2, group_size=10**9)
    # when described
    desc = param_comms(args)
    # then the group is one short text, and its members are computed, not listed
    assert desc is not None and desc.kind == COMM_COLL and desc.group == "3+2*1000000000"
    assert group_members("3+2*1000000000", [0, 1, 3, 4, 5, 7]) == [3, 5, 7]
    small = param_comms(Args(collective_name="broadcast", group_ranks="[0, ...]",
                             rank_start=0, rank_stride=2, group_size=40))
    assert small is not None and small.group == tuple(range(0, 80, 2))  # listed, as before
    peer = param_comms(Args(collective_name="send", group_ranks="[0, ...]", rank_start=4,
                            rank_stride=3, group_size=1000, comm_rank=2))
    assert peer is not None and (peer.kind, peer.peer) == (COMM_SEND, 10)


def test_range_payload_that_is_no_rank_stays_in_the_name() -> None:
    name = f"{ranges.SEND} peer={HUGE}"
    assert ranges.split_payload(name) == (name, {})
    assert from_range_name(name) is None  # not a profplug send range: no comm row
    assert ranges.split_payload(f"{ranges.SEND} peer=3")[1] == {"peer": (3,)}


def test_salvaged_event_keeps_its_comm_fields() -> None:
    # given a record_param_comms whose args hold an integer beyond int64 in a typed field
    item = (b'{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, '
            b'"tid": 1, "ts": 1.0, "dur": 1.0, "args": {"device": 100000000000000000000000, '
            b'"Collective name": "send", "Dst Rank": 3}}')
    # when decoded one by one
    ev, why = decode_item(item)
    # then the event is kept with its description (the odd field dropped)
    assert why is None and ev is not None and ev.args is not None
    assert ev.args.collective_name == "send" and ev.args.dst_rank == 3
