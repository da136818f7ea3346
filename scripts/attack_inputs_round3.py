"""Builders of the hostile inputs of issue #27 (robustness, round 3) for scripts/attacks.py.

Each builder writes its input into a directory and returns the ``profplug`` arguments. The
issue's attacks come first in each item, then one class of our own ("own").
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attack_inputs import ROOT, kineto_bytes, launch_pairs, write
from synth import NsysExport

Build = Callable[[Path], list[str]]
AB_SAMPLE = ROOT / "sample_traces" / "ab_h200_megatron_pp1" / "ab.json"
EPOCH_US = 1_764_000_000_000_000


def _nsys(path: Path, rank: int | None, t0: float = 0.0, n: int = 12, vm: int = 0,
          pid: int = 4242, ex: NsysExport | None = None) -> NsysExport:
    ex = ex or NsysExport()
    p = ex.process(pid=pid)
    p.vm = vm
    if rank is not None:
        p.rank_mark(rank)
    for k in range(n):
        p.launch(t0 + 100.0 * k, t0 + 100.0 * k + 2, 50.0)
        p.runtime("cudaDeviceSynchronize", t0 + 100.0 * k + 3, 60.0)
    if path is not None:
        ex.write(path)
    return ex


def _kineto(d: Path, name: str, rank: int, base: int | None = None) -> None:
    body = kineto_bytes(launch_pairs(120), base=base if base is not None else 10**18)
    body = body.replace(b'"rank": 0', b'"rank": %d' % rank)
    if base == 0:
        body = body.replace(b', "baseTimeNanoseconds": 0', b"")
    (d / name).write_bytes(body)


# ------------------------------------------------------------------- 1: clocks
def mixed_clocks(case: str) -> Build:
    def build(d: Path) -> list[str]:
        t = d / "traces"
        t.mkdir()
        if case == "kineto+nsys":
            _kineto(t, "rank0.json", 0, base=1_764_000_000_000_000_000)
            _nsys(t / "rank1.sqlite", 1)
        elif case == "kineto without base":
            _kineto(t, "rank0.json", 0, base=1_764_000_000_000_000_000)
            _kineto(t, "rank1.json", 1, base=0)
        else:  # own: two Nsight sessions, no NCCL
            _nsys(t / "a.sqlite", 0)
            _nsys(t / "b.sqlite", 1, t0=5e6)
        # JSON: the warnings go to stderr, the last of them shows in the table
        return ["report", str(t), "--jobs", "1", "-f", "json", "-o", str(d / "r.json")]
    return build


# ------------------------------------------------------------------- 2: epoch decimals
def epoch_decimals(exponent: bool) -> Build:
    def build(d: Path) -> list[str]:
        ev = []
        for k in range(2000):
            whole, frac = EPOCH_US + 1000 * k, (250 * k) % 1000
            digits = str(whole)  # 16 digits: d.ddd...e15, exactly
            ts = (f"{digits[0]}.{digits[1:]}{frac:03d}e15" if exponent
                  else f"{whole}.{frac:03d}")
            ev.append(b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
                      b'"ts": %s, "dur": 0.375, "args": {"device": 0, "stream": 7}}'
                      % ts.encode())
        return write(d, "rank0.json", kineto_bytes(ev, base="null"))
    return build


# ------------------------------------------------------------------- 3: Nsight processes
def nsys_processes(case: str) -> Build:
    def build(d: Path) -> list[str]:
        db = d / "report.sqlite"
        if case == "two VMs":
            ex = _nsys(None, None, vm=0)
            _nsys(db, None, t0=5000.0, vm=1, ex=ex)
        elif case == "top bit":  # own: globalPid with bit 63 set (negative int64)
            _nsys(db, None, vm=-128)
        else:
            _nsys(db, None)
            con = sqlite3.connect(db)
            if case == "NULL globalPid":
                con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL "
                            "WHERE rowid = 3")
            else:  # dangling nameId
                con.execute("DELETE FROM StringIds WHERE value LIKE 'cudaDeviceSync%'")
            con.commit()
            con.close()
        return ["report", str(db), "--strict", "--jobs", "1"]
    return build


def kineto_begin_end(d: Path) -> list[str]:
    ev = launch_pairs(100)
    ev += [b'{"ph": "%s", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 7, '
           b'"tid": 1, "ts": %.1f}' % (ph, ts) for ph, ts in ((b"B", 3.0), (b"E", 900.0))]
    return [*write(d, "rank0.json", kineto_bytes(ev)), "--strict"]


# ------------------------------------------------------------------- 4: output over input
def output_over_input(case: str) -> Build:
    def build(d: Path) -> list[str]:
        p = d / "rank0.json"
        p.write_bytes(kineto_bytes(launch_pairs(100)))
        if case == "report -o X":
            return ["report", str(p), "-o", str(p)]
        if case == "report --html X":
            return ["report", str(p), "--html", str(p)]
        if case == "whatif -o X":
            return ["whatif", str(p), "-o", str(p)]
        if case == "report D -f json -o D/report.json":
            return ["report", str(d), "-f", "json", "-o", str(d / "report.json")]
        if case == "ab-report D --html D/ab.json":
            return ["ab-report", str(_ab(d)), "--html", str(d / "ab" / "ab.json")]
        os.link(p, d / "twin.json")  # own: a hard link to the trace
        return ["report", str(p), "-o", str(d / "twin.json")]
    return build


# ------------------------------------------------------------------- ab.json
def _ab(d: Path, change: Callable[[dict[str, Any]], Any] | None = None,
        text: str | None = None) -> Path:
    out = d / "ab"
    out.mkdir()
    doc = json.loads(AB_SAMPLE.read_text())
    if change is not None:
        change(doc)
    (out / "ab.json").write_text(text if text is not None else json.dumps(doc))
    return out


def _fail_run(doc: dict[str, Any], key: str, value: Any) -> None:
    doc["runs"][1]["status"] = "failed"
    doc["runs"][1][key] = value


SCRIPT = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def ab_case(case: str) -> Build:
    def build(d: Path) -> list[str]:
        html = ["--html", str(d / "ab.html")]
        if case == "script in a failed run's index":
            return ["ab-report", str(_ab(d, lambda doc: _fail_run(doc, "index", SCRIPT))),
                    *html]
        if case == "script in the command":  # own
            return ["ab-report", str(_ab(d, lambda doc: doc.update(command=[SCRIPT]))), *html]
        if case == "symlinked ab.json":
            out = _ab(d)
            target = d / "elsewhere.json"
            (out / "ab.json").rename(target)
            (out / "ab.json").symlink_to(target)
            return ["ab-report", str(out)]
        if case == "hard-linked ab.json":  # own
            out = _ab(d)
            os.link(out / "ab.json", d / "elsewhere.json")
            return ["ab-report", str(out)]
        out = d / "ab"
        out.mkdir()
        if case == "ab.json a FIFO":
            os.mkfifo(out / "ab.json")
        elif case == "ab.json a link to /dev/zero":
            (out / "ab.json").symlink_to("/dev/zero")
        else:  # own: a directory
            (out / "ab.json").mkdir()
        return ["ab-report", str(out)]
    return build


def ab_tampered(case: str) -> Build:
    def build(d: Path) -> list[str]:
        def neg(doc: dict[str, Any]) -> None:
            for r in doc["runs"]:
                if r["policy"] == "event":
                    for k in r["ranks"]:
                        k["step_us"] = [-x for x in k["step_us"]]

        changes: dict[str, Callable[[dict[str, Any]], Any]] = {
            "rounds 10**7": lambda doc: doc.update(rounds=10**7),
            "rounds -3": lambda doc: doc.update(rounds=-3),
            "10^5 policies": lambda doc: doc.update(policies=[f"p{k}" for k in range(10**5)]),
            "negative step times": neg,
            "a round as a string": lambda doc: doc["runs"][0].update(round="0"),
            "no device policy": lambda doc: doc.update(policies=["event"]),
        }
        if case == "NaN in a step time":  # own
            text = AB_SAMPLE.read_text().replace('"step_us": [', '"step_us": [NaN, ', 1)
            return ["ab-report", str(_ab(d, text=text))]
        return ["ab-report", str(_ab(d, changes[case]))]
    return build


def ab_escapes(case: str) -> Build:
    def build(d: Path) -> list[str]:
        esc = "event\x1b]8;;http://x\x07\x1b[2J"

        def differ(doc: dict[str, Any]) -> None:
            doc["policies"] = [esc if p == "event" else p for p in doc["policies"]]
            for r in doc["runs"]:
                if r["policy"] == "event":
                    r["policy"] = esc
            r = doc["runs"][1]
            r["ranks"][0]["step_digests"] = ["bad"] * len(r["ranks"][0]["step_digests"])

        if case == "ESC in a policy name (OUTPUTS DIFFER)":
            return ["ab-report", str(_ab(d, differ))]
        out = _ab(d)  # own: bidi override and ESC in the directory's name
        odd = d / "ab\u202e\x1b[31mdir"
        out.rename(odd)
        return ["ab-report", str(odd)]
    return build


# ------------------------------------------------------------------- 6: pasted command
def nsys_command(case: str) -> Build:
    def build(d: Path) -> list[str]:
        name = ("x;touch pwned;$(touch pwned2).nsys-rep" if case == "shell syntax"
                else "x\ntouch pwned3.nsys-rep")  # own: a newline
        p = d / name
        p.write_bytes(b"not really a report")
        return ["report", str(p), "--nsys", str(d / "no-nsys")]
    return build


# ------------------------------------------------------------------- 9, 10: size, devices
def long_label(source: str) -> Build:
    def build(d: Path) -> list[str]:
        name = "x" * (10 << 20)
        if source == "nsys":  # own: an NVTX range
            ex = NsysExport()
            p = ex.process()
            p.annotation(name, 0, 400 * 20 + 10)
            for k in range(400):
                p.launch(20.0 * k, 20.0 * k + 1, 5.0)
                p.runtime("cudaDeviceSynchronize", 20.0 * k + 2, 10.0)
            return ["report", str(ex.write(d / "report.sqlite")), "--jobs", "1"]
        ev = [b'{"ph": "X", "cat": "user_annotation", "name": "%s", "pid": 7, "tid": 1, '
              b'"ts": 0.0, "dur": 8100.0}' % name.encode()]
        for k in range(400):
            ev += launch_pairs(1, 20.0 * k)
            ev.append(b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", '
                      b'"pid": 7, "tid": 1, "ts": %.1f, "dur": 10.0}' % (20.0 * k + 3))
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


def many_devices(what: str, n: int = 160_000) -> Build:
    def build(d: Path) -> list[str]:
        key = b"device" if what == "devices" else b"stream"
        ev = []
        for k in range(n):
            ev.append(b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
                      b'"ts": %.1f, "dur": 1.0, "args": {"device": %d, "stream": %d}}'
                      % (10.0 * k, k if key == b"device" else 0, k if key == b"stream" else 7))
        return write(d, "rank0.json", kineto_bytes(ev))
    return build


# ------------------------------------------------------------------- 12: regexes
def regex(case: str) -> Build:
    def build(d: Path) -> list[str]:
        if case == "(a+)+$":
            ev = [b'{"ph": "X", "cat": "user_annotation", "name": "%s", "pid": 7, "tid": 1, '
                  b'"ts": 0.0, "dur": 100.0}' % (b"a" * 34 + b"b"), *launch_pairs(10)]
            return [*write(d, "rank0.json", kineto_bytes(ev)), "--step-range", "re:(a+)+$"]
        ev = [b'{"ph": "X", "cat": "user_annotation", "name": "%s", "pid": 7, "tid": 1, '
              b'"ts": %d.0, "dur": 1.0}' % (b"x" * 30 + b"%d" % k, k) for k in range(20_000)]
        return [*write(d, "rank0.json", kineto_bytes([*ev, *launch_pairs(10)])),
                "--step-range", "re:(x+x+)+y"]
    return build


# ------------------------------------------------------------------- 13: deep run.json
def deep_run_json(case: str) -> Build:
    def build(d: Path) -> list[str]:
        (d / "kineto").mkdir()
        write(d / "kineto", "rank0.json", kineto_bytes(launch_pairs(50)))
        deep = ("[" * 900 + "]" * 900) if case == "list" else (
            '{"x": ' * 800 + "1" + "}" * 800)
        (d / "run.json").write_text('{"command": ["python"], "deep": ' + deep + "}")
        if case == "compare":
            (d / "b").mkdir()
            write(d / "b", "rank0.json", kineto_bytes(launch_pairs(50)))
            return ["compare", str(d / "kineto"), str(d / "b"), "--html", str(d / "c.html")]
        return ["report", str(d / "kineto"), "--html", str(d / "r.html"), "--jobs", "1"]
    return build


# ------------------------------------------------------------------- 15: CLI numbers
def cli_number(args: list[str]) -> Build:
    def build(d: Path) -> list[str]:
        p = d / "rank0.json"
        p.write_bytes(kineto_bytes(launch_pairs(100)))
        return [args[0], str(p), *args[1:]]
    return build


# ------------------------------------------------------------------- 17: missing ranks
def skipped_entry(case: str) -> Build:
    def build(d: Path) -> list[str]:
        (d / "rank0.json").write_bytes(kineto_bytes(launch_pairs(50)))
        target = d / "rank1.json"
        if case == "a FIFO":
            os.mkfifo(target)
        elif case == "a dangling link":
            target.symlink_to(d / "gone.json")
        elif case == "a link to /dev/zero":
            target.symlink_to("/dev/zero")
        else:  # own: a socket
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(target))
            s.close()
        return ["report", str(d), "--strict", "--jobs", "1"]
    return build


# ------------------------------------------------------------------- 18: messages
def dash_output(flag: str) -> Build:
    def build(d: Path) -> list[str]:
        p = d / "rank0.json"
        p.write_bytes(kineto_bytes(launch_pairs(50)))
        fmt = ["-f", "json"] if flag == "-o" else []
        return ["report", str(p), flag, "-", *fmt, "--no-whatif"]
    return build
