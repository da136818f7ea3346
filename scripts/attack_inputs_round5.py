"""Builders of the round-5 attacks (issue #48) that scripts/attacks_round5.py runs.

Each builder prepares its inputs in a directory ``d`` and returns a :class:`Step` list: the
``profplug`` invocations (or Python snippets) to run there, in order; the last one is the
one measured. Builders copy the shipped samples they need; none writes outside ``d``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from synth import KinetoTrace, sync_loop  # noqa: E402
from synth.pipeline import PipelineSpec, pipeline  # noqa: E402

SAMPLES = ROOT / "sample_traces"
PP2 = SAMPLES / "pp2_infer_kineto"
WAITS = SAMPLES / "h200_three_waits"
AB = SAMPLES / "ab_h200_decode_loop"


@dataclass
class Step:
    """One process: ``profplug ARGS`` (or ``python -c CODE ARGS`` when ``code``), in ``cwd``
    (default: the attack's directory), SIGINT/SIGTERM sent ``signal_after_s`` after start."""

    args: list[str]
    code: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    signal: str | None = None  # "SIGINT" / "SIGTERM"
    signal_after_s: float = 0.0
    watch: str | None = None  # send the signal when this file (in the folder) starts to change
    python_flags: list[str] = field(default_factory=list)
    own_path: bool = False  # run with its own PYTHONPATH only, never the --base install


Build = Callable[[Path], list[Step]]


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("timing_paired", "*.html"))
    return dst


# ------------------------------------------------------------------ 1: outputs destroyed
def signal_during_replace(sig: str, after_s: float) -> Build:
    def build(d: Path) -> list[Step]:
        return [Step(["report", str(PP2 / "device"), "-f", "json", "-o", "report.json",
                      "--html", "report.html", "-q", "-j", "1"]),
                Step(["report", str(PP2 / "device"), "-f", "json", "-o", "report.json",
                      "--html", "report.html", "-q", "-j", "1"], signal=sig,
                     signal_after_s=after_s)]
    return build


# ------------------------------------------------------------------ 2: inputs rewritten
def ab_report_sample(d: Path) -> list[Step]:
    _copy(AB, d / "ab")
    return [Step(["ab-report", "ab"])]


def report_cache_into_input(then_plain: bool) -> Build:
    def build(d: Path) -> list[Step]:
        run = d / "D"
        run.mkdir()
        sync_loop(run / "rank0.json")
        steps = [Step(["report", "D", "--cache", "D", "-q"])]
        return [*steps, Step(["report", "D", "-q"])] if then_plain else steps
    return build


def nsys_bad_path(d: Path) -> list[Step]:
    shutil.copy(WAITS / "nsys" / "report.nsys-rep", d / "x.nsys-rep")  # no export beside
    return [Step(["report", "x.nsys-rep", "--nsys", "/bad/path"])]


# ------------------------------------------------------------------ 3: stored paths
def ab_report_from_another_project(d: Path) -> list[Step]:
    """The README's shape: ab.json stores ``--whatif runs/pp2`` as given; another project
    folder holds an unrelated trace at the same relative path."""
    ab = _copy(AB, d / "project" / "ab")
    doc = json.loads((ab / "ab.json").read_text())
    doc["whatif"]["run"] = "runs/pp2"
    (ab / "ab.json").write_text(json.dumps(doc))
    shutil.copytree(PP2 / "device", d / "other" / "runs" / "pp2")
    return [Step(["ab-report", "../project/ab"], cwd=str(d / "other"))]


# ------------------------------------------------------------------ 4: accepted, wrong
def mixed_ranks_of_two_runs(d: Path) -> list[Step]:
    (d / "mixed").mkdir()
    shutil.copy(PP2 / "device" / "kineto" / "rank0.json.gz", d / "mixed")
    shutil.copy(PP2 / "event" / "kineto" / "rank1.json.gz", d / "mixed")
    return [Step(["report", "mixed", "-f", "json", "-o", "r.json"])]


def mixed_ranks_with_run_json(d: Path) -> list[Step]:
    return [Step(["report", f"{PP2}/device/kineto/rank0.json.gz,"
                            f"{PP2}/event/kineto/rank1.json.gz"])]


def plain(*args: str) -> Build:
    def build(d: Path) -> list[Step]:
        return [Step(list(args))]
    return build


def devtools_trace(d: Path) -> list[Step]:
    ev = [{"name": "RunTask", "cat": "disabled-by-default-devtools.timeline", "ph": "X",
           "ts": 1000 + 10 * i, "dur": 5, "pid": 1, "tid": 2, "args": {}} for i in range(200)]
    (d / "Trace.json").write_text(json.dumps({"traceEvents": ev,
                                              "metadata": {"source": "DevTools"}}))
    return [Step(["report", "Trace.json"])]


def hard_linked_copy(d: Path) -> list[Step]:
    (d / "copy" / "kineto").mkdir(parents=True)
    for f in (PP2 / "device" / "kineto").iterdir():
        try:
            os.link(f, d / "copy" / "kineto" / f.name)
        except OSError:
            shutil.copyfile(f, d / "copy" / "kineto" / f.name)
    return [Step(["compare", str(PP2 / "device"), "copy", "-q"])]


def whatif_against_copy(d: Path) -> list[Step]:
    shutil.copytree(PP2 / "device", d / "devcopy")
    return [Step(["whatif", str(PP2 / "device"), "--against", "devcopy", "-f", "json"])]


def output_json_without_format(d: Path) -> list[Step]:
    return [Step(["report", str(PP2 / "device"), "-o", "out.json", "-q"])]


# ------------------------------------------------------------------ 5: tracebacks
def ctrl_c_at(after_s: float) -> Build:
    def build(d: Path) -> list[Step]:
        return [Step(["report", str(PP2 / "device")], signal="SIGINT", signal_after_s=after_s)]
    return build


DASK_NO_CLOSE = """
from profplug.analyzers import analyze
from profplug.analyzers.scale.dask_backend import DaskBackend
if __name__ == "__main__":
    rep = analyze([{!r}], backend=DaskBackend("local:1"))
    print(len(rep.ranks), "ranks; the backend is never closed")
""".format(str(PP2 / "device"))


def dask_without_close(d: Path) -> list[Step]:
    (d / "api.py").write_text(DASK_NO_CLOSE)
    return [Step(["api.py"], code="-file")]


# ------------------------------------------------------------------ 6: misleading errors
def rank_header(value: object) -> Build:
    def build(d: Path) -> list[Step]:
        KinetoTrace(rank=1).write(d / "a.json")
        doc = KinetoTrace(rank=1).to_dict()
        doc["distributedInfo"]["rank"] = value
        (d / "b.json").write_text(json.dumps(doc))
        return [Step(["report", "a.json", "b.json"])]
    return build


def step_range_only_in_a(d: Path) -> list[Step]:
    for name, rng in (("a", "decode_step"), ("b", "other_step")):
        (d / name).mkdir()
        t = KinetoTrace(rank=0)
        for i in range(4):
            t.annotation(rng, 30 * i, 25)
            t.launch(30 * i + 1, 30 * i + 3, 10)
        t.write(d / name / "rank0.json")
    return [Step(["compare", "a", "b", "--step-range", "decode_step"])]


def nsys_rep_with_gz_beside(d: Path) -> list[Step]:
    shutil.copytree(SAMPLES / "pp2_infer_nsys" / "device", d / "run")
    return [Step(["report", "run/report.nsys-rep", "-q"], env={"PATH": "/usr/bin:/bin"})]


# ------------------------------------------------------------------ 7: left from earlier
def correlation_at(value: int) -> Build:
    def build(d: Path) -> list[Step]:
        t = KinetoTrace(rank=0)
        for i in range(10):
            t.launch(100 + 20 * i, 105 + 20 * i, 10)
        doc = t.to_dict()
        kernels = [e for e in doc["traceEvents"] if e["cat"] == "kernel"]
        kernels[4]["args"]["correlation"] = value
        (d / "rank0.json").write_text(json.dumps(doc))
        return [Step(["report", "rank0.json", "-f", "json", "-o", "r.json"])]
    return build


def run_json_401_digits(d: Path) -> list[Step]:
    run = d / "run"
    (run / "kineto").mkdir(parents=True)
    sync_loop(run / "kineto" / "rank0.json")
    (run / "run.json").write_text('{"world_size": 1, "ranks": [{"rank": 0, "timing": '
                                  '{"step_us": [100.0, ' + "9" * 401 + ']}}]}')
    return [Step(["report", "run/kineto", "-f", "json", "-o", "r.json"])]


def mixed_base_clocks(d: Path) -> list[Step]:
    (d / "run").mkdir()
    traces, _ = pipeline(PipelineSpec())
    for t in traces[:2]:
        doc = t.to_dict()
        for e in doc["traceEvents"]:
            if "NCCL" in e.get("name", "") or "nccl" in e.get("name", ""):
                e["name"] = "gemm_kernel"  # nothing to align the clocks with
        if t.rank == 1:
            doc.pop("baseTimeNanoseconds", None)
        (d / "run" / f"rank{t.rank}.json").write_text(json.dumps(doc))
    return [Step(["report", "run", "-f", "json", "-o", "r.json"])]


# ------------------------------------------------------------------ 8: from the checkout
CHECKOUT_IMPORT = ("import profplug.analyzers as a, importlib.util as u; print(a.__file__, "
                   "'profplug.tests importable:', u.find_spec('profplug.tests') is not None)")


def from_checkout(what: str) -> Build:
    """In a checkout's root (``$ATTACK_CHECKOUT``, else this one), nothing installed."""
    def build(d: Path) -> list[Step]:
        import sysconfig

        env = {"PYTHONPATH": sysconfig.get_paths()["purelib"]}  # no .pth: no install's finder
        root = os.environ.get("ATTACK_CHECKOUT") or str(ROOT)
        if what == "import":
            return [Step([], code=CHECKOUT_IMPORT, cwd=root, env=env, python_flags=["-S"],
                         own_path=True)]
        return [Step(["report", "sample_traces/h200_three_waits/kineto", "-f", "json", "-o",
                      str(d / "r.json"), "-q"], cwd=root, env=env, python_flags=["-S"],
                     own_path=True)]
    return build


def gz_json(path: Path, doc: object) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path
