"""transformers' own pipeline-parallel generate (``DistributedConfig(pp_size=2)``, the real
library, 2 gloo ranks under torchrun, ``examples/hf_pipeline_generate.py``, which never imports
profplug) under ``profplug run`` and ``profplug ab``: its communication annotated with
Megatron's range names, one step per model forward, every policy reaching the job, the
broadcast logits digested and identical across policies. Each job runs once per session
(``shared_job``); the tests read it.

On gloo transformers moves the tensors to the CPU and calls no ``torch.cuda.synchronize()``:
what the policies do there is checked on a CUDA stub (``test_sync_sites.py``)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from shared_jobs import shared_job


def _installed(module: str) -> bool:
    """``module`` is installed: found, not imported (the jobs import it in their own processes;
    imported here, transformers would load in every pytest worker that collects this file)."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin is None:
        return False
    inner = Path(spec.origin).parent.joinpath(*rest.split(".")) if rest else None
    return inner is None or inner.with_suffix(".py").is_file() or inner.is_dir()


pytestmark = pytest.mark.skipif(
    not (_installed("transformers.distributed.pipeline_parallel") and _installed("accelerate")),
    reason="transformers' pipeline parallelism (5.x) and accelerate are not installed")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hf_pipeline_generate.py"
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
SITE = "transformers.distributed.pipeline_parallel:PipelineStage."
# 2 generate() calls of 6 tokens: 12 model forwards, each one step on each rank
# --standalone: a free rendezvous port, not 29500, which another job on the machine may hold
JOB = [
    TORCHRUN,
    "--standalone",
    "--nproc-per-node",
    "2",
    str(EXAMPLE),
    "--calls",
    "2",
    "--new-tokens",
    "6",
    "--hidden",
    "32",
    "--layers",
    "2",
    "--vocab",
    "64",
]


def _profplug(folder: Path, *args: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "profplug", *args, "--", *JOB],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=500,
    )
    (folder / "rc").write_text(str(res.returncode))
    (folder / "stdout").write_text(res.stdout)
    (folder / "stderr").write_text(res.stderr)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``profplug run`` (Kineto, the device policy): steps 2..5 in the window; two sync sites
    declared on the command line (one that exists and is called while the model loads, one
    that does not exist)."""
    sites = ["--sync-site", SITE + "layer_range_for_rank", "--sync-site", SITE + "missing"]
    folder = shared_job(
        tmp_path_factory,
        "hf_run",
        lambda f: _profplug(f, "run", "-o", str(f / "run"), "--skip", "2", "--steps", "4", *sites),
    )
    assert (folder / "rc").read_text() == "0", (folder / "stderr").read_text()[-3000:]
    return folder / "run"


@pytest.fixture(scope="module")
def ab(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``profplug ab``, 3 policies switched every 3 steps, 2 runs (block orders rotated, so
    a step runs under different policies in the two runs); steps 2..10 timed (a block of
    each policy in them), 0-1 and 11 digested."""
    folder = shared_job(
        tmp_path_factory,
        "hf_ab",
        lambda f: _profplug(
            f,
            "ab",
            "-o",
            str(f / "ab"),
            "--policies",
            "device,event,none",
            "--rounds",
            "2",
            "--switch-every",
            "3",
            "--skip",
            "2",
            "--steps",
            "9",
        ),
    )
    assert (folder / "rc").read_text() == "0", (folder / "stderr").read_text()[-3000:]
    return json.loads((folder / "ab" / "ab.json").read_text())


def _annotations(run: Path, rank: int) -> list[str]:
    import gzip

    doc = json.loads(gzip.open(run / "kineto" / f"rank{rank}.json.gz").read())
    return [e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]


@pytest.mark.slow
def test_its_communication_is_annotated_with_megatrons_range_names(traced: Path) -> None:
    sends = ["profplug.send_to_next_pipeline_rank peer=1"]
    recvs = ["profplug.recv_from_prev_pipeline_rank_ peer=0"]
    bcast = ["profplug.broadcast_from_last_pipeline_stage root=1 group=0,1"]
    for rank, p2p in ((0, sends), (1, recvs)):
        names = _annotations(traced, rank)
        assert [n for n in names if n.startswith("profplug.") and "pipeline" in n] == (
            p2p + bcast
        ) * 4  # each window step: its send or recv, then the broadcast
        assert names.count("profplug.step") == 4


@pytest.mark.slow
def test_the_analyzer_reads_its_sends_recvs_and_broadcasts_with_their_peers(traced) -> None:
    from profplug.analyzers.core.timeline import COMM_COLL, COMM_RECV, COMM_SEND
    from profplug.analyzers.readers.kineto.reader import read_kineto

    for rank, kind, peer in ((0, COMM_SEND, 1), (1, COMM_RECV, 0)):
        tl = read_kineto(traced / "kineto" / f"rank{rank}.json.gz")
        ours = tl.comm_src == 0  # profplug's ranges (COMM_SOURCES[0])
        got = sorted(zip(tl.comm_kind[ours].tolist(), tl.comm_peer[ours].tolist(), strict=True))
        assert got == sorted([(kind, peer)] * 4 + [(COMM_COLL, 1)] * 4)
        assert np.all(tl.step_end_ns > tl.step_start_ns) and tl.step_start_ns.size == 4


@pytest.mark.slow
def test_sync_sites_declared_on_the_command_line_reach_every_rank(traced: Path) -> None:
    run = json.loads((traced / "run.json").read_text())
    assert run["env"]["PROFPLUG_SYNC_SITE"] == f"{SITE}layer_range_for_rank,{SITE}missing"
    assert run["warnings"] == [
        f"--sync-site {SITE}missing: transformers.distributed.pipeline_parallel has no "
        "attribute 'PipelineStage.missing'; no policy applied there"
    ]
    for rank in run["ranks"]:
        sites = {s["name"]: s for s in rank["sync_sites"]}
        declared = sites[SITE + "layer_range_for_rank"]
        assert declared["origin"] == "declared" and declared["patched"] and declared["calls"]


@pytest.mark.slow
def test_its_steps_are_found_one_per_model_forward(traced: Path) -> None:
    run = json.loads((traced / "run.json").read_text())
    assert run["no_window"] is None
    for rank in run["ranks"]:
        window = rank["window"]
        assert window["step_source"] == "transformers" and window["first_step"] == 2
        assert rank["versions"]["transformers"].startswith("5.")
        sites = {s["name"]: s for s in rank["sync_sites"] if s["origin"] == "transformers"}
        # 12 forwards: one send or recv each, one broadcast each, on every rank
        assert {n: (s["patched"], s["calls"], s["error"]) for n, s in sites.items()} == {
            SITE + "communicate": (True, 12, None),
            SITE + "broadcast_from_last": (True, 12, None),
        }


@pytest.mark.slow
def test_every_policy_reached_the_job_and_outputs_are_identical(ab: dict) -> None:
    runs = ab["runs"]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert ab["outputs_identical"] is True
    for run in runs:
        for rank in run["ranks"]:
            assert rank["step_source"] == "transformers" and rank["digest_calls"] == 3
            counts = rank["policy_counts"]
            # a send or recv and a broadcast per step, under the policy of the step's block
            assert sum(counts[p]["p2p_calls"] for p in counts) == 24
            assert all(counts[p]["p2p_calls"] > 0 for p in ("device", "event", "none"))
            assert all(
                counts[p]["device_syncs"] == counts[p]["event_waits"] == 0 for p in counts
            )  # gloo: no synchronize to replace
    assert {r["block_order"][0] for r in runs} == {"device", "event"}  # rotated
