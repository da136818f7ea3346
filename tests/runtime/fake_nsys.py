"""A stand-in for Nsight Systems' ``nsys`` CLI, for CPU tests of ``profplug run --trace nsys``.

``nsys profile [switches] CMD...``: checks the switches the way nsys does (unknown switch or
bad value: exit 1 before starting anything), runs CMD as a child in its own process group,
and mimics what nsys does when a ``--capture-range=cudaProfilerApi`` range ends under
``--capture-range-end=stop``: the collection ends and nsys sends the ``--kill`` signal
(default ``sigterm``; ``none``: no signal) to the application's process group. A CPU job
cannot call cudaProfilerStop, so the moment it would is marked by the job creating the file
named by ``FAKE_NSYS_CAPTURE_END``. Then, like nsys: waits for CMD, writes the report
(``-o``/``--output`` + ``.nsys-rep``, a placeholder here) and exits with CMD's status.

Both print carriage-return progress bars as nsys does ("Processing N events: [=   ] 25%"):
profile on stdout once the job has ended, export on stderr.

``nsys export ...``: exits 0 without writing anything else. ``FAKE_NSYS_LOG``: a JSON-lines file
that receives ``{"argv": [...]}`` per call and ``{"event": ...}`` per capture end / signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

VALUED = {  # switches nsys profile takes with a value (the ones profplug may pass, and a few)
    "-t": None, "--trace": None, "-s": ("none", "cpu", "process-tree", "system-wide"),
    "--sample": ("none", "cpu", "process-tree", "system-wide"),
    "--cpuctxsw": ("none", "process-tree", "system-wide"),
    "--capture-range": ("none", "cudaProfilerApi", "nvtx", "hotkey"),
    "--capture-range-end": ("none", "stop", "stop-shutdown", "repeat", "repeat-shutdown"),
    "-o": None, "--output": None, "--force-overwrite": ("true", "false"),
    "--kill": ("none", "sigterm", "sigkill"), "-w": ("true", "false"),
}
KILL = {"sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}


def log(record: dict) -> None:
    path = os.environ.get("FAKE_NSYS_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def parse(args: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, eq, value = args[i].partition("=")
        if name not in VALUED:
            sys.exit(f"fake nsys: unrecognised option {name!r}")
        if not eq:
            i += 1
            if i >= len(args):
                sys.exit(f"fake nsys: {name} needs a value")
            value = args[i]
        allowed = VALUED[name]
        if allowed is not None and value not in allowed and not (
                name == "--kill" and value.isdigit()):
            sys.exit(f"fake nsys: bad value {value!r} for {name}")
        opts[name.lstrip("-")] = value
        i += 1
    return opts, args[i:]


def progress_bar(stream, what: str) -> None:
    for pct in range(0, 101, 5):
        bar = "=" * (pct // 10)
        stream.write(f"\r{what}: [{bar:<10}] {pct}%")
        stream.flush()
    stream.write("\n")
    stream.flush()


def profile(args: list[str]) -> int:
    opts, cmd = parse(args)
    if not cmd:
        sys.exit("fake nsys: no application given")
    kill = opts.get("kill", "sigterm")
    sig = None if kill == "none" else KILL.get(kill) or int(kill)
    ends = opts.get("capture-range") == "cudaProfilerApi" and opts.get(
        "capture-range-end", "stop") in ("stop", "stop-shutdown")
    marker = os.environ.get("FAKE_NSYS_CAPTURE_END")
    app = subprocess.Popen(cmd, start_new_session=True)
    collecting = True
    while app.poll() is None:
        if collecting and ends and marker and os.path.exists(marker):
            collecting = False
            log({"event": "capture-end", "kill": kill})
            if sig is not None:
                log({"event": "signal", "signal": int(sig)})
                os.killpg(app.pid, sig)
        time.sleep(0.02)
    out = opts.get("o") or opts.get("output") or "report1"
    with open(out + ".nsys-rep", "w") as f:
        f.write("fake nsys report\n")
    progress_bar(sys.stdout, "Processing 1234 events")
    rc = app.returncode
    return 128 - rc if rc < 0 else rc


def main() -> int:
    log({"argv": sys.argv[1:]})
    if len(sys.argv) > 1 and sys.argv[1] == "profile":
        return profile(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "export":
        progress_bar(sys.stderr, "Exporting 1234 events")
        return 0
    sys.exit(f"fake nsys: unsupported command {sys.argv[1:2]}")


if __name__ == "__main__":
    sys.exit(main())
