"""Inputs of issue #40 (robustness, round 4), items 1-4, 9, 18, 19, 21, 22, 24: outputs over
the files a command reads, one file named twice, numbers out of range in run.json and ab.json,
tampered, huge and zero-step ab.json. Each build writes into ``d`` and returns the profplug
arguments (``scripts/attacks.py`` runs them)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from attack_inputs import kineto_bytes, launch_pairs
from attack_inputs_round3 import _ab
from synth import NsysExport

Build = Any


def _run(d: Path, run_json: str | None = None) -> Path:
    """A ``profplug run`` folder: d/run/run.json and d/run/kineto/rank0.json."""
    run = d / "run"
    (run / "kineto").mkdir(parents=True)
    (run / "run.json").write_text(run_json or json.dumps({"world_size": 1, "note": "input"}))
    (run / "kineto" / "rank0.json").write_bytes(kineto_bytes(launch_pairs(50)))
    return run


def over_run_json(case: str) -> Build:
    def build(d: Path) -> list[str]:
        run = _run(d)
        k, rj = str(run / "kineto"), str(run / "run.json")
        if case == "report RUN/kineto -f json -o RUN/run.json":
            return ["report", k, "-f", "json", "-o", rj]
        if case == "whatif RUN/kineto -o RUN/run.json":
            return ["whatif", k, "-o", rj]
        if case == "report RUN/kineto --html RUN/run.json":
            return ["report", k, "--html", rj]
        os.link(run / "run.json", d / "other.json")  # own: a hard link to run.json
        return ["report", k, "-f", "json", "-o", str(d / "other.json")]
    return build


def _export(d: Path) -> Path:
    ex = NsysExport()
    p = ex.process()
    for k in range(10):
        p.launch(100.0 * k, 100.0 * k + 2, 50.0)
        p.runtime("cudaDeviceSynchronize", 100.0 * k + 3, 60.0)
    db = ex.write(d / "x.sqlite")
    rep = d / "x.nsys-rep"
    rep.write_bytes(b"the capture")
    os.utime(db, (rep.stat().st_mtime + 10,) * 2)  # the export is newer: used as is
    return db


def nsys_twin(case: str) -> Build:
    def build(d: Path) -> list[str]:
        db = _export(d)
        if case == "report X.sqlite -o X.nsys-rep":
            return ["report", str(db), "-o", str(d / "x.nsys-rep")]
        if case == "report X.nsys-rep -o X.sqlite":
            return ["report", str(d / "x.nsys-rep"), "-o", str(db)]
        return ["report", str(db), "-o", str(d / "x.sqlite-wal")]  # own: the export's WAL
    return build


def two_outputs(case: str) -> Build:
    def build(d: Path) -> list[str]:
        p = d / "rank0.json"
        p.write_bytes(kineto_bytes(launch_pairs(50)))
        if case == "-o X --html X":
            return ["report", str(p), "-o", str(d / "x"), "--html", str(d / "x")]
        if case == "-o - --html -":
            return ["report", str(p), "-o", "-", "--html", "-"]
        (d / "link").symlink_to(d / "x")  # own: -o X --html LINK-TO-X
        return ["report", str(p), "-o", str(d / "x"), "--html", str(d / "link")]
    return build


def named_twice(case: str) -> Build:
    def build(d: Path) -> list[str]:
        sub = d / "d"
        sub.mkdir()
        f = sub / "trace.json"  # no rank in the file: numbered by file order
        f.write_bytes(kineto_bytes(launch_pairs(50)).replace(b'"rank": 0', b'"x": 0'))
        if case == "report f d/./f":
            return ["report", str(f), str(sub / "." / "trace.json"), "-f", "json"]
        if case == "report DIR DIR/f":
            return ["report", str(sub), str(f), "-f", "json"]
        os.link(f, d / "again.json")  # own: a hard link named beside the file
        return ["report", str(f), str(d / "again.json"), "-f", "json"]
    return build


def run_json_number(case: str) -> Build:
    def build(d: Path) -> list[str]:
        value = {"401-digit step_us": "9" * 401, "own: 1e400 step_us": "1e400"}[case]
        text = ('{"world_size": 1, "ranks": [{"rank": 0, "timing": {"step_us": [100.0, V]}, '
                '"untraced": {"before": {"step_us": [90, 90, 90, 90, 90]}}}]}')
        run = _run(d, text.replace("V", value))
        return ["report", str(run / "kineto"), "-f", "json"]
    return build


def tiny_unprofiled(value: str, flag: str = "--unprofiled") -> Build:
    def build(d: Path) -> list[str]:
        p = d / "rank0.json"
        p.write_bytes(kineto_bytes(launch_pairs(50)))
        extra = ["--unprofiled", "100"] if flag != "--unprofiled" else []
        return ["whatif", str(p), *extra, flag, value, "-f", "json"]
    return build


def _steps(doc: dict[str, Any], make: Any) -> None:
    for r in doc["runs"]:
        for k in r.get("ranks") or []:
            k["step_us"] = make(r, k)
            k["host_step_us"] = None


def ab_number(case: str) -> Build:
    def build(d: Path) -> list[str]:
        changes = {
            "ab.json step times 5e-324":
                lambda doc: _steps(doc, lambda r, k: [5e-324] * 5),
            "ab.json step times 3.6e9 against 5e-324":
                lambda doc: _steps(doc, lambda r, k: [3.6e9 if r["policy"] == "device"
                                                      else 5e-324] * 5),
            "own: ab.json stored what-if predicted 1e-310":
                lambda doc: doc.update(whatif={"run": "r", "predicted_step_us": 1e-310,
                                               "recorded_step_us": 1e308}),
        }
        return ["ab-report", str(_ab(d, changes[case]))]
    return build


def ab_whatif(case: str) -> Build:
    def build(d: Path) -> list[str]:
        wi = {"stored what-if empty": {},
              "stored what-if predicted a string":
                  {"run": "r", "predicted_step_us": "fast", "recorded_step_us": 100.0},
              "own: stored what-if a list of ranks as a string":
                  {"run": "r", "predicted_step_us": 90.0, "recorded_step_us": 100.0,
                   "traced": "x"}}[case]
        return ["ab-report", str(_ab(d, lambda doc: doc.update(whatif=wi)))]
    return build


def ab_unknown_fields(d: Path) -> list[str]:
    return ["ab-report", str(_ab(d, lambda doc: doc.update(note="kept?", future={"a": 1})))]


def ab_huge(n: int) -> Build:
    def build(d: Path) -> list[str]:
        rng = random.Random(0)

        def make(r: dict[str, Any], k: dict[str, Any]) -> list[float]:
            return [round(500.0 * (1 + 0.01 * rng.random()), 3) for _ in range(per)]

        def change(doc: dict[str, Any]) -> None:
            nonlocal per
            per = n // sum(len(r.get("ranks") or []) for r in doc["runs"])
            _steps(doc, make)
            for r in doc["runs"]:
                for k in r.get("ranks") or []:
                    k.pop("step_digests", None)
        per = 0
        return ["ab-report", str(_ab(d, change))]
    return build


def ab_zero_steps(case: str) -> Build:
    def build(d: Path) -> list[str]:
        def none(r: dict[str, Any], k: dict[str, Any]) -> list[float]:
            if case == "zero-step ab.json" or r["policy"] == "event":
                return []  # own: the event runs alone without steps
            return k.get("step_us") or [500.0] * 5

        return ["ab-report", str(_ab(d, lambda doc: _steps(doc, none)))]
    return build
