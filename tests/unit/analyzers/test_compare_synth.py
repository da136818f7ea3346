"""Synthetic two-rank runs with exactly known answers, shared by the compare/HTML tests.

Each step of each rank: a step range ``ProfilerStep#k`` [t0, t0+P) on the host; a compute
kernel at GPU t0+2 (50 us) and a NCCL kernel at t0+52 (20 us), so the GPU is busy
t0+2 .. t0+72 and idle until the next step's first kernel at t0+P+2 (gap P-70 us).

- ``device`` run (P = 100): a ``cudaDeviceSynchronize`` [t0+5, t0+75] inside
  ``profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device`` holds every gap start:
  each gap (30 us) is device_sync idle.
- ``event`` run (P = 80): rank 0 is host-bound (gap 10 us), rank 1 blocks in
  ``cudaEventSynchronize`` [t0+5, t0+75]: each 10 us gap is event_sync idle.

With N steps a rank has N-1 gaps (the window ends with the last kernel).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from profplug.analyzers.readers.registry import SUFFIXES
from profplug.analyzers.report.analysis import analyze
from profplug.analyzers.scale.load import SKIP_NAMES
from synth import KinetoTrace

N_STEPS = 5
PERIOD = {"device": 100.0, "event": 80.0}
RECV = "profplug.recv_from_prev_pipeline_rank_"


def build_rank(kind: str, rank: int, kernel: str = "gemm_kernel",
               annotation: str = RECV, n_steps: int = N_STEPS, t0: float = 1000.0
               ) -> KinetoTrace:
    tr = KinetoTrace(rank=rank, pid=4000 + rank)
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


def write_run(root: Path, kind: str, n_ranks: int = 2, **kw: object) -> Path:
    """A run directory ``root/<kind>`` with one Kineto trace per rank."""
    d = root / kind
    d.mkdir(parents=True, exist_ok=True)
    for r in range(n_ranks):
        build_rank(kind, r, **kw).write(d / f"rank{r}.json")  # type: ignore[arg-type]
    return d


def test_device_run_has_the_known_answer(tmp_path: Path) -> None:
    # given a synthetic device-sync run, when analyzed
    rep = analyze([write_run(tmp_path, "device")])
    # then each rank has N-1 gaps of 30 us, all device_sync, and 100 us steps
    for r in rep.ranks:
        assert r.idle_by_cause_us()["device_sync"] == pytest.approx(30.0 * (N_STEPS - 1))
        assert r.total("idle_us") == pytest.approx(30.0 * (N_STEPS - 1))
        assert r.steps is not None and r.steps.step_us_mean == pytest.approx(100.0)
        assert r.steps.idle_per_step_us["device_sync"] == pytest.approx(30.0)  # median
        assert r.steps.idle_per_step_us_mean["device_sync"] == pytest.approx(24.0)
        assert r.windows_ns[0][1] - r.windows_ns[0][0] == round(r.total("window_us") * 1000)


def test_event_run_has_the_known_answer(tmp_path: Path) -> None:
    rep = analyze([write_run(tmp_path, "event")])
    ic0, ic1 = rep.rank(0).idle_by_cause_us(), rep.rank(1).idle_by_cause_us()
    assert ic0["host_bound"] == pytest.approx(40.0) and ic0["device_sync"] == 0
    assert ic1["event_sync"] == pytest.approx(40.0) and ic1["device_sync"] == 0
    assert rep.rank(1).steps is not None and rep.rank(1).steps.step_us_mean == 80.0


# ---------------------------------------------------------------- real sample runs (optional)
SAMPLES = Path(__file__).resolve().parents[3] / "sample_traces"


def sample_run_dirs() -> list[Path]:
    """Directories under sample_traces/ that hold traces (each is one run)."""
    if not SAMPLES.is_dir():
        return []
    out = []
    for d in sorted(p for p in SAMPLES.rglob("*") if p.is_dir()):
        if any(f.is_file() and f.name.endswith(SUFFIXES) and f.name not in SKIP_NAMES
               for f in d.iterdir()):
            out.append(d)
    return out


def sample_device_event_pairs() -> list[tuple[Path, Path]]:
    """(device run, event run) pairs: sibling sample dirs named *device* and *event*."""
    runs = sample_run_dirs()
    pairs = []
    for dv in runs:
        if "device" in dv.name:
            ev = dv.with_name(dv.name.replace("device", "event"))
            if ev in runs:
                pairs.append((dv, ev))
    return pairs
