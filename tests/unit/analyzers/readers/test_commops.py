"""The comm_* table: what each reader finds about sends, recvs and collectives (times in us)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from profplug.analyzers.core import ranges
from profplug.analyzers.core.timeline import (
    COMM_COLL,
    COMM_RECV,
    COMM_SEND,
    COMM_SRC_NCCL_NVTX,
    COMM_SRC_PARAM_COMMS,
    COMM_SRC_PROFPLUG,
    COMM_SRC_TORCH,
    Timeline,
)
from profplug.analyzers.readers.commops import from_range_name
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.readers.nsys.reader import read_nsys
from synth import KinetoTrace, NsysExport

NCCL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


def _rows(tl: Timeline) -> list[tuple]:
    """(start us, kind, peer, group, seq, name, src) per comm row, by start."""
    order = np.argsort(tl.comm_start_ns, kind="stable")
    base = int(tl.gpu_start_ns.min()) if tl.n_gpu else 0
    return [((int(tl.comm_start_ns[i]) - base) / 1000, int(tl.comm_kind[i]),
             int(tl.comm_peer[i]),
             tl.names[tl.comm_group[i]] if tl.comm_group[i] >= 0 else None,
             int(tl.comm_seq[i]), tl.names[tl.comm_name[i]], int(tl.comm_src[i]))
            for i in order]


def test_range_names() -> None:
    send = from_range_name(ranges.p2p_range(ranges.SEND, 3))
    assert send is not None and (send.kind, send.peer, send.name) == (COMM_SEND, 3, "send")
    old = from_range_name(ranges.RECV)  # a trace from before the payload: kind only
    assert old is not None and (old.kind, old.peer, old.src) == (COMM_RECV, -1,
                                                                 COMM_SRC_PROFPLUG)
    bc = from_range_name(ranges.broadcast_range(3, (0, 1, 2, 3)))
    assert bc is not None and (bc.kind, bc.peer, bc.group) == (COMM_COLL, 3, (0, 1, 2, 3))
    t = from_range_name("nccl:recv 1<-0")
    assert t is not None and (t.kind, t.peer, t.src) == (COMM_RECV, 0, COMM_SRC_TORCH)
    ar = from_range_name("ncclAllReduce")
    assert ar is not None and (ar.kind, ar.name, ar.src) == (COMM_COLL, "all_reduce",
                                                             COMM_SRC_NCCL_NVTX)
    for name in ("nccl:coalesced", "profplug.post", "gemm", "profplug.step",
                 "profplug.synchronize a.py:3 f"):
        assert from_range_name(name) is None, name


def test_kineto_ranges_and_record_param_comms(tmp_path: Path) -> None:
    # given a rank that sends to 2 (profplug range with its peer), then receives from 0 as
    # torch describes it in record_param_comms (batched: the kernel launches after it)
    t = KinetoTrace(rank=1)
    t.annotation(ranges.p2p_range(ranges.SEND, 2), 0, 20)
    t.launch(5, 10, 4, name=NCCL, stream=20)
    t.cpu_op("record_param_comms", 30, 2, {
        "Collective name": "recv", "Process Group Ranks": "[0, 1, 2, 3]", "Rank": 0,
        "Src Rank": 0, "Group size": 4, "Seq": 7})
    t.launch(33, 40, 4, name=NCCL, stream=20)
    t.cpu_op("record_param_comms", 50, 2, {
        "Collective name": "broadcast", "Process Group Ranks": "[1, 3]", "Rank": 0,
        "Group size": 2, "Seq": 8})
    t.cpu_op("record_param_comms", 60, 2, {"Collective name": "coalesced"})
    t.cpu_op("aten::mm", 70, 2, {})
    # when read
    tl = read_kineto(t.write(tmp_path / "r1.json"))
    # then each description is one row, with what its source says
    assert _rows(tl) == [
        (-10.0, COMM_SEND, 2, None, -1, "send", COMM_SRC_PROFPLUG),
        (20.0, COMM_RECV, 0, "0,1,2,3", 7, "recv", COMM_SRC_PARAM_COMMS),
        (40.0, COMM_COLL, -1, "1,3", 8, "broadcast", COMM_SRC_PARAM_COMMS),
    ]


def test_record_param_comms_without_global_ranks_maps_the_group_rank(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.launch(0, 1, 1)
    t.cpu_op("record_param_comms", 5, 1, {"Collective name": "send",
                                           "Process Group Ranks": "[4, 6]", "Rank": 1})
    tl = read_kineto(t.write(tmp_path / "r0.json"))
    assert [(r[1], r[2], r[3]) for r in _rows(tl)] == [(COMM_SEND, 6, "4,6")]


def test_nsys_profplug_ranges_and_nccl_payload(tmp_path: Path) -> None:
    # given one process with a profplug send range (peer in the name) and NCCL's own NVTX
    # ranges, one with an exported payload holding the peer and one without
    ex = NsysExport()
    p = ex.process(100)
    p.rank_mark(0)
    p.annotation(ranges.p2p_range(ranges.SEND, 1), 0, 20, domain=1)
    p.annotation("ncclSend", 2, 1, domain=2,
                 json_text='{"NCCL communicator ID": 7, "Message size [bytes]": 64, '
                           '"Peer rank": 1}')
    p.launch(4, 10, 4, name=NCCL, stream=20)
    p.annotation("ncclRecv", 30, 1, domain=2)
    p.launch(32, 40, 4, name=NCCL, stream=20)
    # when read
    (tl,) = read_nsys(ex.write(tmp_path / "r.sqlite"))
    # then
    assert [r[1:] for r in _rows(tl)] == [
        (COMM_SEND, 1, None, -1, "send", COMM_SRC_PROFPLUG),
        (COMM_SEND, 1, None, -1, "send", COMM_SRC_NCCL_NVTX),
        (COMM_RECV, -1, None, -1, "recv", COMM_SRC_NCCL_NVTX),
    ]


def test_save_load_keeps_the_comm_table_and_reads_older_files(tmp_path: Path) -> None:
    t = KinetoTrace(rank=0)
    t.annotation(ranges.broadcast_range(1, (0, 1)), 0, 5)
    t.launch(1, 2, 1, name="ncclDevKernel_Broadcast_RING_LL(x)")
    tl = read_kineto(t.write(tmp_path / "r0.json"))
    tl.save(tmp_path / "tl.npz")
    back = Timeline.load(tmp_path / "tl.npz")
    assert _rows(back) == _rows(tl) and back.comm_kind.dtype == np.int8
    # a file written before the table existed
    z = dict(np.load(tmp_path / "tl.npz"))
    for k in [k for k in z if k.startswith("comm_")]:
        del z[k]
    np.savez(tmp_path / "old.npz", **z)
    old = Timeline.load(tmp_path / "old.npz")
    assert old.comm_kind.size == 0 and old.n_gpu == tl.n_gpu
