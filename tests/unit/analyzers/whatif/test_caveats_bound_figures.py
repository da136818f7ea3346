"""Figures never claim more than their own caveats allow (issue 41, item 8; times in us):

- *direct* (GPU idle charged to the dropped synchronizes) is at most the time those calls
  blocked the host: a gap that started inside a synchronize and went on long after it
  returned is the host's own time beyond it;
- a prediction whose peers are missing has no band (JSON null, "n/a"), as the finding line
  withholds it, never the bare +-1% of a one-rank replay.
"""

from __future__ import annotations

import json
from pathlib import Path

from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.whatif import whatif
from synth import KinetoTrace

from profplug.cli.main import main

SYNC_US, HOST_US, STEPS, P = 7.0, 900.0, 6, 1000.0


def long_host_after_sync(tmp: Path, nccl: bool = False) -> Path:
    """Per step: a 10 us kernel, a device-wide synchronize in the recv blocking the host
    ``SYNC_US`` (the GPU idles from its start + 10), then ``HOST_US`` of host work before the
    next launch: one gap of ~990 us per step that starts inside the synchronize."""
    t = KinetoTrace(rank=0)
    for k in range(STEPS):
        T = P * k
        t.annotation(f"ProfilerStep#{k}", T, P)
        t.launch(T, T + 1, 10.0)
        t.annotation("profplug.recv_from_prev_pipeline_rank_ peer=1", T + 4, SYNC_US + 4)
        t.annotation("profplug.sync.device", T + 5, SYNC_US + 1)
        if nccl:  # the recv's NCCL kernel, its peer (rank 1) not given
            t.launch(T + 4.5, T + 5, 2.0, name="ncclDevKernel_SendRecv", stream=20,
                     api_dur=0.5)
        t.runtime("cudaDeviceSynchronize", T + 6, SYNC_US)
    return t.write(tmp / "rank0.json")


def test_direct_never_exceeds_the_time_the_syncs_blocked_the_host(tmp_path: Path) -> None:
    r = whatif([read_kineto(long_host_after_sync(tmp_path), 0)]).rank(0)
    assert r.basis == "step" and r.dropped_calls > 0
    assert 0 < r.direct_us <= SYNC_US  # the gap is ~990 us; the sync blocked 7 us of it


def test_a_prediction_with_peers_missing_has_no_band(
        tmp_path: Path, capsys) -> None:
    path = str(long_host_after_sync(tmp_path, nccl=True))  # rank 0 of a world of 2, alone
    assert main(["whatif", path, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)["whatif"]
    assert any(w.startswith("peer ranks missing") for w in d["warnings"])
    assert [(r["error_band_pct"], r["run_band_pct"]) for r in d["ranks"]] == [(None, None)]
    assert main(["whatif", path]) == 0
    out = capsys.readouterr().out
    assert "Prediction withheld: peer ranks missing" in " ".join(out.split())
    row = next(x for x in out.splitlines() if x.strip().startswith("0 step"))
    assert " n/a " in row and "+-1" not in out
