"""Synthetic inputs with exactly known answers (times in us): the one builder of traces the
tests share (no test module imports another). Import its names from ``synth`` itself, the
pipeline generator's from ``synth.pipeline``.

- one way to describe a rank's events, :class:`Recorder`'s methods (``runtime``, ``gpu``,
  ``launch``, ``annotation``, ``cuda_sync``), recorded in either format:
  :class:`KinetoTrace` (a Kineto trace) or :class:`NsysProcess` (a process of an
  :class:`NsysExport`, an Nsight Systems SQLite export); :func:`rank_trace` gives an empty
  one of either for one rank (``synth/recorder.py``, ``kineto.py``, ``nsys.py``);
- the scenarios several modules share, written into any recorder where the answer does not
  depend on the format (``synth/scenarios.py``);
- N-stage pipelines that follow the what-if model's timing rules, with their exact answers
  (``synth.pipeline``: ``PipelineSpec``, ``write``, ``Truth``; imported from there);
- ``profplug ab``'s run records (``synth/ab.py``) and the checks made on reports
  (``synth/checks.py``).
"""

from synth.ab import AB_MEANS, AB_POLICIES, ab_result, ab_run, ab_runs
from synth.checks import analyze_traces, api_is_top, check_sums, one_error
from synth.kineto import BASE_NS, KinetoTrace
from synth.nsys import OPTIONAL, NsysExport, NsysProcess
from synth.recorder import Recorder, rank_trace
from synth.scenarios import (
    N_STEPS,
    NCCL,
    PERIOD,
    PLANTED_AT,
    PLANTED_PERIOD,
    PLANTED_RECV,
    PLANTED_STALL,
    PLANTED_STEPS,
    RECV,
    build_rank,
    mixed_trace,
    nested,
    nsys_ring,
    planted_step,
    planted_trace,
    run_folder,
    sync_loop,
    sync_loop_export,
    two_ranks,
    write_run,
)

__all__ = [
    "AB_MEANS", "AB_POLICIES", "BASE_NS", "NCCL", "N_STEPS", "OPTIONAL", "PERIOD",
    "PLANTED_AT", "PLANTED_PERIOD", "PLANTED_RECV", "PLANTED_STALL", "PLANTED_STEPS", "RECV",
    "KinetoTrace", "NsysExport", "NsysProcess", "Recorder", "ab_result", "ab_run", "ab_runs",
    "analyze_traces", "api_is_top", "build_rank", "check_sums", "mixed_trace", "nested",
    "nsys_ring", "one_error", "planted_step", "planted_trace", "rank_trace", "run_folder",
    "sync_loop", "sync_loop_export", "two_ranks", "write_run",
]
