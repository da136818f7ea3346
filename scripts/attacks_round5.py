"""The round-5 attacks (issue #48): outputs destroyed, inputs rewritten, stored paths,
accepted-but-wrong inputs, tracebacks, misleading errors, leftovers, the checkout.

Prints one markdown row per attack: exit status, wall time and peak RSS of the measured
process, whether a traceback escaped, the files of the attack's folder before and after it
(added +, removed -, changed ~), and the last line of output:

    .venv/bin/python scripts/attacks_round5.py [--only SUBSTRING] [--base SITE]

``--base SITE`` runs another profplug instead: a ``pip install --target SITE`` of an older
checkout (put first on ``PYTHONPATH``), to measure "before". Each attack runs in a fresh
temporary folder; the measured process's peak RSS comes from ``wait4``. Three attacks are
not one process: the full disk (a 8 MiB tmpfs, needs root to mount), a signal during the
replace (12 tries at delays spread over a run), two writers and a polling reader.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import attack_inputs_round5  # noqa: E402
from attack_inputs_round5 import PP2, WAITS, Build, Step  # noqa: E402

ATTACKS: list[tuple[str, str, Build]] = [
    ("2", "ab-report DIR (the shipped sample)", attack_inputs_round5.ab_report_sample),
    ("2", "report D --cache D", attack_inputs_round5.report_cache_into_input(False)),
    ("2", "report D --cache D, then report D", attack_inputs_round5.report_cache_into_input(True)),
    ("3", "ab-report ../ab from a project holding another runs/pp2", attack_inputs_round5.ab_report_from_another_project),
    ("4", "rank 0 of a device run + rank 1 of an event run (no run.json)", attack_inputs_round5.mixed_ranks_of_two_runs),
    ("4", "rank 0 of a device run + rank 1 of an event run (their run.json)", attack_inputs_round5.mixed_ranks_with_run_json),
    ("4", "report ,", attack_inputs_round5.plain("report", ",")),
    ("4", "report ,,", attack_inputs_round5.plain("report", ",,")),
    ("4", "report ''", attack_inputs_round5.plain("report", "")),
    ("4", "compare , X", attack_inputs_round5.plain("compare", ",", "X")),
    ("4", "a Chrome DevTools trace", attack_inputs_round5.devtools_trace),
    ("4", "compare KINETO NSYS", attack_inputs_round5.plain("compare", str(WAITS / "kineto"), str(WAITS / "nsys"), "-q")),
    ("4", "compare AB_DIR TRACED", attack_inputs_round5.plain("compare", str(attack_inputs_round5.AB), str(attack_inputs_round5.AB / "traced_device"), "-q")),
    ("4", "compare RUN HARD_LINKED_COPY", attack_inputs_round5.hard_linked_copy),
    ("4", "whatif DEV --against DEV", attack_inputs_round5.plain("whatif", str(PP2 / "device"), "--against", str(PP2 / "device"), "-f", "json")),
    ("4", "whatif DEV --against a copy of DEV", attack_inputs_round5.whatif_against_copy),
    ("4", "report -j 0", attack_inputs_round5.plain("report", str(PP2 / "device"), "-j", "0")),
    ("4", "report -o out.json (no -f)", attack_inputs_round5.output_json_without_format),
    ("5", "--step-range 're:a{99999999999}'", attack_inputs_round5.plain("report", str(PP2 / "device"), "--step-range", "re:a{99999999999}")),
    *(("5", f"Ctrl-C {t:g} s after the start", attack_inputs_round5.ctrl_c_at(t)) for t in (0.05, 0.15, 0.3)),
    ("5", "Python API, Dask backend never closed", attack_inputs_round5.dask_without_close),
    *(("6", f"rank header {v!r} in b.json", attack_inputs_round5.rank_header(v)) for v in (True, 1.5, "x", -1)),
    ("6", "compare --step-range X that only run A has", attack_inputs_round5.step_range_only_in_a),
    ("6", "report FOLDER holding a device and an event run", attack_inputs_round5.plain("report", str(PP2))),
    ("6", "whatif DEV EVENT", attack_inputs_round5.plain("whatif", str(PP2 / "device"), str(PP2 / "event"))),
    ("6", "--nsys /bad/path", attack_inputs_round5.nsys_bad_path),
    ("6", "report X.nsys-rep, X.sqlite.gz beside it, no nsys", attack_inputs_round5.nsys_rep_with_gz_beside),
    ("6", "ab-report -f json", attack_inputs_round5.plain("ab-report", str(attack_inputs_round5.AB), "-f", "json")),
    ("6", "profplug --version", attack_inputs_round5.plain("--version")),
    *(("7", f"Kineto correlation id {v}", attack_inputs_round5.correlation_at(v)) for v in (2**63, -(2**63) - 1)),
    ("7", "run.json with a 401-digit step", attack_inputs_round5.run_json_401_digits),
    ("7", "a base-timed and an unbased rank, nothing to align", attack_inputs_round5.mixed_base_clocks),
    ("8", "import profplug.analyzers in the checkout (no install)", attack_inputs_round5.from_checkout("import")),
    ("8", "python -m profplug report in the checkout (no install)", attack_inputs_round5.from_checkout("run")),
]


# the line shown for an attack whose telling line is not its first warning
PICK = {"run.json with a 401-digit step": "run.json", "compare KINETO NSYS": "traced by",
        "a base-timed and an unbased rank, nothing to align": "mixed clocks",
        "compare RUN HARD_LINKED_COPY": "same run", "ab-report -f json": "analyzed again",
        "rank 0 of a device run + rank 1 of an event run (no run.json)": "apart",
        "report X.nsys-rep, X.sqlite.gz beside it, no nsys": "stall report",
        "report D --cache D, then report D": "stall report"}


def _json_doc(path: Path) -> str:
    try:
        json.loads(path.read_text())
        return f"{path.name}: JSON"
    except ValueError:
        return f"{path.name}: not JSON ({path.read_text()[:40]!r}...)"
    except OSError:
        return f"{path.name}: not written"


def _rank0(path: Path) -> str:
    try:
        r = json.loads(path.read_text())["ranks"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return "no r.json"
    return f"r.json: busy_us {r['busy_us']}, skipped {r.get('skipped')}"


def _whatif_line(text: str) -> str:
    flat = " ".join(ln.strip() for ln in text.splitlines())
    pred = re.search(r"what-if \(([^,]*),.*?predicted ([\d,.]+) us/step", flat)
    why = re.search(r"not recomputed: (.*?)\)\)", flat)
    return (f"what-if of {pred.group(1)}: predicted {pred.group(2)} us/step"
            + (f"; not recomputed: {why.group(1)}" if why else "; recomputed") if pred
            else "no what-if line")


# a summary of the attack's outcome from its folder or output, shown instead of a line
POST = {"report -o out.json (no -f)": lambda d, t: _json_doc(d / "out.json"),
        "Kineto correlation id 9223372036854775808": lambda d, t: _rank0(d / "r.json"),
        "Kineto correlation id -9223372036854775809": lambda d, t: _rank0(d / "r.json"),
        "ab-report ../ab from a project holding another runs/pp2":
            lambda d, t: _whatif_line(t)}


def snapshot(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(d))] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def changes(before: dict[str, str], after: dict[str, str]) -> str:
    add = [f"+{k}" for k in after if k not in before]
    gone = [f"-{k}" for k in before if k not in after]
    changed = [f"~{k}" for k in after if k in before and before[k] != after[k]]
    moved = add + gone + changed
    head = f"{len(before)} -> {len(after)}"
    return head + (": " + " ".join(moved[:6]) + (" ..." if len(moved) > 6 else "")
                   if moved else ", unchanged")


def run_step(step: Step, d: Path, base: str) -> dict[str, object]:
    """One process, waited with wait4: its exit status, wall time, peak RSS and output."""
    env = {**os.environ, "TMPDIR": str(d), **step.env}
    if base and not step.own_path:
        env["PYTHONPATH"] = base + (os.pathsep + env["PYTHONPATH"]
                                    if step.env.get("PYTHONPATH") else "")
    if step.code == "-file":
        cmd = [sys.executable, *step.python_flags, *step.args]
    elif step.code is not None:
        cmd = [sys.executable, *step.python_flags, "-c", step.code, *step.args]
    else:
        cmd = [sys.executable, *step.python_flags, "-m", "profplug", *step.args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=step.cwd or d, env=env, stdout=out, stderr=err)
        if step.signal:
            if step.watch:  # the moment the output starts to change: inside the replace
                _await_change(d / step.watch, t0 + 60)
            else:
                time.sleep(step.signal_after_s)
            os.kill(proc.pid, getattr(signal, step.signal))  # not send_signal: it reaps
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text = err.read().decode(errors="replace") + "\n" + out.read().decode(errors="replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    keys = ("error:", "warning:", "interrupted", "Traceback", "ERROR ")
    first = next((ln for ln in lines if any(k in ln for k in keys)),
                 next((ln for ln in lines if ln.startswith("profplug")),
                      lines[0] if lines else ""))
    return {"exit": proc.returncode, "wall_s": wall, "rss_mb": ru.ru_maxrss / 1024,
            "traceback": "Traceback" in text, "line": first, "text": text}


def _await_change(target: Path, deadline: float) -> None:
    """Return as soon as ``target`` changes size or a temporary appears beside it."""
    def state() -> tuple[int, bool]:
        try:
            size = target.stat().st_size
        except OSError:
            size = -1
        return size, any(n.startswith(".profplug-tmp-") for n in os.listdir(target.parent))

    first = state()
    while time.perf_counter() < deadline and state() == first:
        pass


def row(item: str, name: str, r: dict[str, object], files: str, d: Path) -> str:
    pick = [ln for ln in str(r["text"]).splitlines() if PICK.get(name, "\0") in ln]
    line = pick[0].strip() if pick else str(r["line"])
    if name in POST:
        line = POST[name](d, str(r["text"]))
    line = line.replace(str(d), "<dir>").replace(str(attack_inputs_round5.ROOT), "<repo>")
    line = line.replace("|", "/").replace("`", "'")[:160]
    return (f"| {item} | {name} | {r['exit']} | {float(r['wall_s']):.2f} | "
            f"{float(r['rss_mb']):.0f} | {'yes' if r['traceback'] else 'no'} | "
            f"{files.replace(str(d), '<dir>')} | `{line}` |")


def attack(item: str, name: str, build: Build, base: str) -> str:
    with tempfile.TemporaryDirectory(prefix="profplug-r5-") as tmp:
        d = Path(tmp)
        steps = build(d)
        for s in steps[:-1]:
            run_step(s, d, base)
        before = snapshot(d)
        r = run_step(steps[-1], d, base)
        return row(item, name, r, changes(before, snapshot(d)), d)


def _report_args(out: str = "report.json", html: str = "report.html",
                 src: str = str(PP2 / "device")) -> list[str]:
    return ["report", src, "-f", "json", "-o", out, "--html", html, "-q", "-j", "1"]


def _whole(d: Path) -> bool:
    try:
        json.loads((d / "report.json").read_text())
    except (OSError, ValueError):
        return False
    html = (d / "report.html").read_bytes() if (d / "report.html").exists() else b""
    return html.rstrip().endswith(b"</html>")


def signal_tries(sig: str, base: str, tries: int = 12) -> str:
    """SIGNAL sent ``tries`` times at the moment report.html starts to change (its size, or
    a temporary beside it): while an older report.json + report.html are replaced by a
    larger pair."""
    with tempfile.TemporaryDirectory(prefix="profplug-r5-") as tmp:
        d = Path(tmp)
        (d / "small").mkdir()
        small = attack_inputs_round5.sync_loop(d / "small" / "rank0.json")
        whole, left, codes, tb, spans = 0, 0, set(), False, []
        for _ in range(tries):
            run_step(Step(_report_args(src=str(small))), d, base)  # the old outputs
            r = run_step(Step(_report_args(), signal=sig, watch="report.html"), d, base)
            whole += _whole(d)
            extra = [p.name for p in d.iterdir()
                     if p.name not in ("report.json", "report.html", "small")]
            left += len(extra)
            if extra and os.environ.get("ATTACK_DEBUG"):
                print(extra, file=sys.stderr)
            codes.add(r["exit"])
            spans.append(float(r["wall_s"]))
            tb = tb or bool(r["traceback"])
        files = f"outputs whole after {whole}/{tries} tries; {left} other files left"
        return (f"| 1 | {sig} as report.html starts to change ({tries} tries) | "
                f"{'/'.join(map(str, sorted(codes)))} | {max(spans):.2f} (longest) | - | "
                f"{'yes' if tb else 'no'} | {files} | - |")


_READER = """
import json, os
bad = reads = 0
while not os.path.exists("stop"):
    try:
        json.loads(open("report.json").read())
    except ValueError:
        bad += 1
    except OSError:
        pass
    reads += 1
print(bad, reads)
"""


def writers_and_reader(base: str, rounds: int = 4) -> str:
    """Two processes writing one report.json ``rounds`` times each, at once, while a third
    reads it in a loop: how many of its reads were not a whole JSON document."""
    with tempfile.TemporaryDirectory(prefix="profplug-r5-") as tmp:
        d = Path(tmp)
        args = ["report", str(PP2 / "device"), "-f", "json", "-o", "report.json", "-q",
                "-j", "1"]
        run_step(Step(args), d, base)
        reader = subprocess.Popen([sys.executable, "-c", _READER], cwd=d,
                                  stdout=subprocess.PIPE, text=True)
        codes: set[object] = set()

        def writer() -> None:
            for _ in range(rounds):
                codes.add(run_step(Step(args), d, base)["exit"])

        t0 = time.perf_counter()
        ts = [threading.Thread(target=writer) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        span = time.perf_counter() - t0
        (d / "stop").touch()
        bad, reads = reader.communicate()[0].split()
        left = sorted(p.name for p in d.iterdir() if p.name not in ("report.json", "stop"))
        return (f"| 1 | two writers of report.json ({rounds} runs each), a reader polling it | "
                f"{'/'.join(map(str, sorted(codes, key=str)))} | {span:.2f} (all runs) | - | "
                f"no | half-written reads: {bad} of {reads}; other files left: "
                f"{' '.join(left) or 'none'} | - |")


def full_disk(base: str) -> str:
    """An older, smaller report.json + report.html, then a larger pair written over them on
    a tmpfs left with no room (needs root to mount)."""
    with tempfile.TemporaryDirectory(prefix="profplug-r5-") as tmp:
        d = Path(tmp) / "small"
        d.mkdir()
        small = attack_inputs_round5.sync_loop(Path(tmp) / "rank0.json")
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(d)],
                          capture_output=True).returncode:
            return ("| 1 | report over its old outputs on a full disk | n/a: cannot mount a "
                    "tmpfs (not root) | | | | | |")
        try:
            run_step(Step(_report_args(src=str(small))), d, base)
            fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT)
            for chunk in (1 << 16, 1 << 12, 1 << 9, 1):  # fill what is left, to the last byte
                try:
                    while True:
                        os.write(fd, b"\0" * chunk)
                except OSError:
                    pass
            os.close(fd)
            before = snapshot(d)
            r = run_step(Step(_report_args()), d, base)
            after = snapshot(d)
            whole = "whole" if _whole(d) else "NOT whole"
            return row("1", "a larger report.json + .html over older ones on a full tmpfs",
                       r, f"{changes(before, after)}; outputs {whole}", d)
        finally:
            subprocess.run(["umount", str(d)], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--base", default="", help="a pip --target install of another profplug")
    ap.add_argument("--base-src", default="", help="its checkout (for the checkout attacks)")
    a = ap.parse_args()
    if a.base_src:
        os.environ["ATTACK_CHECKOUT"] = a.base_src
    print("| why | attack | exit | wall s | peak RSS MB | traceback | files before -> after | "
          "first line |")
    print("| --- | --- | --- | ---: | ---: | --- | --- | --- |")
    specials = [("full disk", lambda: full_disk(a.base)),
                ("SIGTERM", lambda: signal_tries("SIGTERM", a.base)),
                ("SIGINT", lambda: signal_tries("SIGINT", a.base)),
                ("two writers", lambda: writers_and_reader(a.base))]
    for name, fn in specials:
        if a.only.lower() in name.lower():
            print(fn(), flush=True)
    for item, name, build in ATTACKS:
        if a.only.lower() in name.lower():
            print(attack(item, name, build, a.base), flush=True)


if __name__ == "__main__":
    main()
