"""The drop set is what the sync policy changes: the device-wide synchronizes inside the
pipeline send/recv, not the job's own (times in us, answers by hand).

Each step of the trace (P = 100 us, as ``test_outlier_steps``): compute 50 us at t+2, NCCL
20 us at t+52, the recv's ``cudaDeviceSynchronize`` [t+5, t+75] (a 30 us device_sync gap,
t+72 .. t+102); with ``own``, the job's own ``torch.cuda.synchronize()`` before a barrier
as well, outside the recv: a second ``cudaDeviceSynchronize`` [t+80, t+95] that nothing
waits on but the GPU being already idle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers import analyze
from profplug.analyzers.graph.dropset import FALLBACK_NOTE, is_pipeline_range, policy_mask
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.whatif import DropSpec, whatif, whatif_analysis
from synth import KinetoTrace

from profplug.cli.main import main

N, P = 6, 100.0


def trace(tmp: Path, own: bool, recv: str | None = "profplug.recv_from_prev_pipeline_rank_ "
          "peer=1", name: str = "r.json") -> Path:
    tr = KinetoTrace(rank=0)
    for k in range(N):
        t = 1000.0 + k * P
        tr.annotation(f"ProfilerStep#{k}", t, P)
        tr.launch(at=t + 1, start=t + 2, dur=50)
        tr.launch(at=t + 3, start=t + 52, dur=20, name="ncclDevKernel_SendRecv(x)", stream=9)
        if recv is not None:
            tr.annotation(recv, t + 4, 72)
        tr.runtime("cudaDeviceSynchronize", t + 5, 70)
        if own:
            tr.annotation("barrier_prep", t + 79, 17)
            tr.runtime("cudaDeviceSynchronize", t + 80, 15)
    return tr.write(tmp / name)


@pytest.mark.parametrize("name, pipeline", [
    ("profplug.recv_from_prev_pipeline_rank_ peer=0", True),
    ("profplug.send_to_next_pipeline_rank peer=1", True),
    ("profplug.synchronize megatron/core/inference/communication_utils.py:81 "
     "recv_from_prev_pipeline_rank_", True),  # a patched torch.cuda.synchronize there
    ("communication_utils.send_to_next_pipeline_rank", True),  # Megatron's NVTX style
    ("profplug.broadcast_from_last_pipeline_stage root=1", False),  # no sync to change
    ("my_recv_from_prev_pipeline_rank_2", False),  # not the word
    ("profplug.synchronize train.py:12 main", False),
    ("profplug.sync_site mypipe.comm:Stage.recv", True),  # a declared sync site
    ("profplug.sync_site", False),  # no site named
])
def test_pipeline_range_names(name: str, pipeline: bool) -> None:
    assert is_pipeline_range(name) is pipeline


def test_the_policy_mask_picks_the_syncs_inside_the_recv(tmp_path: Path) -> None:
    tl = read_kineto(trace(tmp_path, own=True), 0)
    mask = policy_mask(tl)
    names = np.array([tl.names[n] for n in tl.api_name])
    starts = (tl.api_start_ns - tl.api_start_ns.min()) // 1000  # us since the first call
    dropped = sorted(int(x) % 100 for x in starts[mask])
    assert set(names[mask]) == {"cudaDeviceSynchronize"} and dropped == [4] * N
    assert int((names == "cudaDeviceSynchronize").sum()) == 2 * N


def test_a_declared_sync_sites_synchronizes_are_the_policys(tmp_path: Path) -> None:
    tl = read_kineto(trace(tmp_path, own=True, recv="profplug.sync_site mypipe:Stage.recv"), 0)
    res = whatif([tl])
    assert res.drop == "policy" and res.drop_note is None
    assert res.rank(0).dropped_calls == N  # the site's, not the 6 before the barrier


def test_the_default_drop_leaves_the_jobs_own_syncs(tmp_path: Path) -> None:
    tl = read_kineto(trace(tmp_path, own=True), 0)
    res = whatif([tl])  # given the default: the policy
    assert res.drop == "policy" and res.drop_note is None
    assert res.rank(0).dropped_calls == N  # the recv's, not the 6 before the barrier
    assert res.dropped() == "the device-wide synchronizes in the pipeline send/recv"
    every = whatif([tl], DropSpec("device-sync"))  # --drop device-sync: all of them
    assert every.rank(0).dropped_calls == 2 * N and every.drop_note is None
    # the kept syncs still hold the host: the policy's prediction is the slower one
    assert res.rank(0).predicted_us >= every.rank(0).predicted_us


def test_without_pipeline_call_sites_it_falls_back_and_says_so(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    trace(d, own=False, recv=None)
    rep = analyze(d, run=[whatif_analysis()])
    res = rep.run["whatif"]
    assert (res.drop, res.drop_note) == ("device-sync", FALLBACK_NOTE)
    assert res.rank(0).dropped_calls == N
    assert rep.headline().startswith("Measured: device-wide synchronizes (all of them: none "
                                     "is in a pipeline send/recv) left rank 0")


def test_cli_drop_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    p = str(trace(tmp_path, own=True))
    for args, n in (([], N), (["--drop", "device-sync"], 2 * N), (["--drop", "policy"], N)):
        assert main(["whatif", p, "-f", "json", *args]) == 0
        d = json.loads(capsys.readouterr().out)["whatif"]
        assert d["ranks"][0]["dropped_calls"] == n and d["statistic"] == "median"
        assert main(["report", p, "-f", "json", "--whatif", *args]) == 0
        d = json.loads(capsys.readouterr().out)["whatif"]
        assert d["ranks"][0]["dropped_calls"] == n
    assert main(["report", p, "--drop", "some"]) == 2
    assert "unknown --drop 'some'" in capsys.readouterr().err


def test_the_fallback_rule_is_the_models_device_sync() -> None:
    from profplug.analyzers.graph import dropset
    from profplug.analyzers.whatif import DROP_DEVICE, DROP_POLICY

    assert (dropset.DROP_DEVICE, dropset.DROP_POLICY) == (DROP_DEVICE, DROP_POLICY)
