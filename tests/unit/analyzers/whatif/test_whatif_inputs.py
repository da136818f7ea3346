"""What the what-if is given: ``--drop-at`` as the report prints the call site (or a unique
part of it), a warning first when peer ranks are missing, and a trace of GPU kernels without
a host call (captured with CUDA activities only, or an Nsight export without its runtime
table) going through the default report like any other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from default_report import default_report
from profplug.analyzers import whatif_paths
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.readers.kineto.reader import read_kineto
from profplug.analyzers.readers.nsys.reader import read_nsys
from profplug.analyzers.whatif import DropSpec
from profplug.analyzers.whatif.peers import PEERS_MISSING
from synth import KinetoTrace, NsysExport, write_run

from profplug.cli.main import main

RECV = "profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device"
SEND = "profplug.send_to_next_pipeline_rank > profplug.sync.device"


def two_sites(tmp_path: Path) -> Path:
    """One rank whose device-wide syncs sit at two call sites (recv and send)."""
    t = KinetoTrace(rank=0)
    for k in range(3):
        o = 100.0 * k
        t.launch(o, o + 1, 20)
        for name, at in (("recv_from_prev_pipeline_rank_", o + 2),
                         ("send_to_next_pipeline_rank", o + 40)):
            t.annotation(f"profplug.{name}", at, 30)
            t.annotation("profplug.sync.device", at + 1, 28)
            t.runtime("cudaDeviceSynchronize", at + 2, 25)
        t.launch(o + 80, o + 81, 10)
    d = tmp_path / "two_sites"
    d.mkdir()
    doc = t.to_dict()
    doc["distributedInfo"]["world_size"] = 1
    (d / "rank0.json").write_text(json.dumps(doc))
    return d


@pytest.mark.parametrize("name", [RECV, "recv_from_prev_pipeline_rank_ > sync.device",
                                  "recv_from_prev", "RECV_FROM"])
def test_drop_at_takes_the_printed_name_or_a_unique_part(tmp_path: Path, name: str) -> None:
    run = two_sites(tmp_path)
    res = whatif_paths(run, DropSpec(callsite=name))
    assert res.callsite == RECV  # resolved to the call site's full name
    assert res.rank(0).dropped_calls == 3  # the recv syncs, not the send ones


def test_an_ambiguous_part_lists_the_matches(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = two_sites(tmp_path)
    assert main(["whatif", str(run), "--drop-at", "sync.device"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == ("profplug: error: --drop-at sync.device matches 2 call sites of a "
                   "device-wide synchronize: recv_from_prev_pipeline_rank_ > sync.device; "
                   "send_to_next_pipeline_rank > sync.device (give more of the name)\n")


def test_no_match_is_an_error_listing_the_call_sites(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    run = two_sites(tmp_path)
    assert main(["whatif", str(run), "--drop-at", "decode"]) == 2
    assert capsys.readouterr().err == (
        "profplug: error: --drop-at decode matches no call site of a device-wide "
        "synchronize; call sites: recv_from_prev_pipeline_rank_ > sync.device; "
        "send_to_next_pipeline_rank > sync.device\n")
    with pytest.raises(ProfplugError, match="no device-wide synchronize to drop"):
        whatif_paths(write_run(tmp_path, "event"), DropSpec(callsite="x"))


def test_one_rank_of_two_warns_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    # given rank 1 of a 2-rank run (distributedInfo.world_size 2)
    run = write_run(tmp_path, "device")
    one = run / "rank1.json"
    # when the what-if replays it alone
    assert main(["whatif", str(one)]) == 0
    out = capsys.readouterr().out
    # then the finding withholds the prediction, and the warning comes right under the
    # title, before any number
    assert "Prediction withheld: peer ranks missing" in " ".join(out.split("\n\n")[0].split())
    lines = out.splitlines()
    t = next(i for i, x in enumerate(lines) if x.startswith("profplug what-if: "))
    assert lines[t + 1].startswith(f"warning: {PEERS_MISSING} (given rank(s) 1 of a world of "
                                   "2; ")
    assert lines[t + 2].startswith("  rank(s) 0)")
    assert main(["whatif", str(one), "-f", "json", "-o", str(tmp_path / "w.json")]) == 0
    assert json.loads((tmp_path / "w.json").read_text())["whatif"]["warnings"][0] \
        .startswith(PEERS_MISSING)
    # and every rank given: no such warning
    assert not any(w.startswith(PEERS_MISSING) for w in whatif_paths(run).warnings)


def test_a_lone_rank_running_nccl_without_world_size_warns(tmp_path: Path) -> None:
    t = KinetoTrace(rank=None)
    t.launch(0, 1, 10, name="ncclDevKernel_SendRecv(x)")
    t.launch(12, 13, 10)
    res = whatif_paths(t.write(tmp_path / "trace.json"))
    assert res.warnings[0].startswith(f"{PEERS_MISSING} (rank 0 alone runs NCCL kernels)")


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_kernels_without_host_calls_go_through_the_default_report(tmp_path: Path,
                                                                  fmt: str) -> None:
    # given a rank's GPU kernels and no host call at all
    if fmt == "kineto":
        k = KinetoTrace(rank=0)
        for i in range(5):
            k.gpu(100.0 * i, 50.0)
        tl = read_kineto(k.write(tmp_path / "rank0.json"))
    else:
        ex = NsysExport()
        p = ex.process()
        for i in range(5):
            p.gpu(100.0 * i, 50.0)
        (tl,) = read_nsys(ex.write(tmp_path / "r.sqlite"))
    assert tl.n_gpu == 5 and tl.api_start_ns.size == 0
    # then the default report (the what-if included) makes every format, no analysis failed
    default_report([tl])
