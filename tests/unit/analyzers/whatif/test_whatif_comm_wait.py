"""Unprofiled what-if: a NCCL kernel that waited for a slower, profiled peer is not GPU work
to keep (``costs.comm_floors``; times in us, answers by hand).

One rank, 4 steps of 100 us: compute 40 us at t+2, then a NCCL kernel at t+42 on the same
stream: 10 us in step 0 (the transfer alone, the floor), 50 us in the others (40 us of
waiting for a peer whose trace is not given, so it cannot be paired).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.whatif import HostCosts, build_model
from profplug.analyzers.whatif.costs import comm_floors
from synth import KinetoTrace, two_ranks

NCCL = "ncclDevKernel_SendRecv(x)"


def trace(tmp: Path) -> Path:
    t = KinetoTrace(rank=0)
    for k in range(4):
        T = 100.0 * k
        t.annotation(f"ProfilerStep#{k}", T, 100.0)
        t.launch(T, T + 2, 40.0)
        t.launch(T + 1, T + 42, 10.0 if k == 0 else 50.0, name=NCCL)
    return t.write(tmp / "r0.json")


def test_an_unpaired_nccl_kernels_wait_scales_with_the_host(tmp_path: Path) -> None:
    tl = read_kineto(trace(tmp_path), 0)
    floors = comm_floors([tl])
    is_nccl = np.array([tl.names[n] == NCCL for n in tl.gpu_name])
    assert set(floors[is_nccl].tolist()) == {10_000} and set(floors[~is_nccl].tolist()) == {-1}
    m = build_model([tl])
    half = HostCosts(0.5, 0.5, comm_floor_ns=floors).apply(m)
    dur_us = (half.o_end - half.o_start) / 1000.0
    # the floor stays, the 40 us wait halves: 10 + 40 * 0.5 = 30; compute is kept
    assert sorted(dur_us[is_nccl].tolist()) == [10.0, 30.0, 30.0, 30.0]
    assert (dur_us[~is_nccl] == 40.0).all()
    same = HostCosts(1.0, 1.0, comm_floor_ns=floors).apply(m)  # the traced host: unchanged
    assert (same.o_end == m.o_end).all()


def test_a_paired_kernel_keeps_its_replayed_wait(tmp_path: Path) -> None:
    tls = [read_kineto(p, i) for i, p in enumerate(two_ranks(tmp_path))]
    m = build_model(tls)
    assert (m.o_peer >= 0).any()
    half = HostCosts(0.5, 0.5, comm_floor_ns=comm_floors(tls)).apply(m)
    paired = m.o_peer >= 0
    assert (half.o_end[paired] == m.o_end[paired]).all()  # the replay sets their wait


def test_the_unprofiled_prediction_uses_the_floors(tmp_path: Path) -> None:
    from profplug.analyzers.whatif import whatif
    from profplug.analyzers.whatif.unprofiled import host_costs

    tls = [read_kineto(trace(tmp_path), 0)]
    plain = whatif(tls, host=HostCosts(0.5, 0.5)).rank(0)
    floors = whatif(tls, host=host_costs(tls, 0.5)).rank(0)
    # GPU-bound at half the host cost: each step's NCCL kernel 20 us shorter
    assert plain.predicted_us - floors.predicted_us == pytest.approx(20.0, abs=1e-3)
