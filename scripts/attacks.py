"""Hostile inputs for the analyzer, each run under a time and an address-space limit.

Rebuilds the attacks of issue #18 (robustness, round 2) and prints, per attack, the exit
code, wall time, peak RSS, whether a traceback escaped, and the last line of output:

    .venv/bin/python scripts/attacks.py [--only SUBSTRING] [--timeout 120] [--mem-gb 4]
        [--pythonpath SRC]   # e.g. an older checkout, to measure "before"

Each attack writes its input into a fresh temporary directory and runs ``profplug`` there as
a child process (``RLIMIT_AS`` = ``--mem-gb``, killed after ``--timeout`` seconds). The small,
deterministic versions of these live in ``tests/robustness/``; this script holds the heavy
ones (hundreds of MB, decompression bombs, 32k-deep nesting).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import attack_inputs  # noqa: E402
import attack_inputs_cache  # noqa: E402
import attack_inputs_main  # noqa: E402
import attack_inputs_round3  # noqa: E402
import attack_inputs_round4  # noqa: E402
import attack_inputs_round4_traces  # noqa: E402
from attack_inputs import Build  # noqa: E402


@dataclass
class Attack:
    item: str
    name: str
    build: Build  # writes the input into the directory, returns the profplug arguments
    env: dict[str, str] = field(default_factory=dict)
    signal_after_s: float | None = None  # send SIGTERM after this long (temp-file cleanup)


ATTACKS = [
    *(Attack("1", f"NaN mid-file, {mb} MB", attack_inputs.bad_token(mb, b"NaN")) for mb in (0.25, 1, 146)),
    Attack("1", "syntax error mid-file, 1 MB", attack_inputs.bad_token(1, b"5.0 x")),
    Attack("1", "lone \\ud800 in the first kernel name", attack_inputs.surrogate_first_kernel),
    *(Attack("3", f"20 MB .json.gz of spaces {w}", attack_inputs.spaces_gz(w))
      for w in ("before", "between events", "after the array")),
    Attack("3", "20 MB .json.gz of repeated kernel events", attack_inputs.kernels_gz),
    Attack("3", "5 MB .sqlite.gz of zeros", attack_inputs.sqlite_gz_zeros),
    *(Attack("3", f"one {mb} MB event", attack_inputs.one_big_event(mb)) for mb in (100, 400)),
    *(Attack("5", f"100k-inp.deep nesting in {w}", attack_inputs.deep(w))
      for w in ("args", "header", "event list", "run.json")),
    *(Attack("5/6/10", c, attack_inputs.numbers(c)) for c in (
        "30-digit ProfilerStep#N", "5000-digit step number", "huge string tid",
        "5000-digit pid", "baseTimeNanoseconds 2^64", "baseTimeNanoseconds near int64 max",
        "epoch and relative ts mixed")),
    Attack("5", "report --whatif near the int64 limit", attack_inputs.whatif_near_limit),
    Attack("5", "Nsight times near the int64 limit (--whatif)", attack_inputs.nsys_near_limit),
    Attack("10", "bad UTF-8 byte in a 146 MB trace", attack_inputs.bad_utf8_big(146)),
    *(Attack("4", f"long sync + {n} short syncs", attack_inputs.long_sync_short_syncs(n))
      for n in (8_000, 32_000)),
    *(Attack("4", f"{n} nested annotations", attack_inputs.nested_annotations(n)) for n in (8_000, 32_000)),
    *(Attack("2", f"recursive VIEW as {t}", attack_inputs.recursive_view(t))
      for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "StringIds", "META_DATA_EXPORT")),
    Attack("2", "StringIds without its index (20k names)", attack_inputs.stringids_no_index),
    Attack("7", "hot WAL beside the export", attack_inputs.hot_wal),
    Attack("7", "WAL-mode export in a read-only directory", attack_inputs.wal_readonly_dir),
    Attack("9", "stale partial .sqlite beside a .nsys-rep (--strict)", attack_inputs.stale_export),
    Attack("10", 'table named with "', attack_inputs.quote_table),
    Attack("10", "profplug.rank \u00b2 mark", attack_inputs.rank_superscript),
    Attack("10", "terminal escapes in an NVTX name", attack_inputs.nvtx_escape),
    Attack("10", "a FIFO", attack_inputs.fifo),
    Attack("10", "newline in a file name", attack_inputs.newline_name),
    Attack("10", "run.json two directories up (--strict)", attack_inputs.run_json_two_up),
    Attack("8", "compare: hostile run label (--html)", attack_inputs.compare_label),
    # against what main added since (comm_* rows, cross-rank and what-if by default, steps)
    *(Attack("5", f"record_param_comms: {c}", attack_inputs_main.param_comms(c))
      for c in ("seq and peer 10^30", "group size 10^9")),
    Attack("5", "--step-range re:step(\\d+), 30-digit numbers", attack_inputs_main.step_range_digits),
    *(Attack("4", f"{n} NCCL kernels per rank, 2 ranks", attack_inputs_main.nccl_kernels(n))
      for n in (20_000, 80_000)),
    *(Attack("4", f"{n} host threads", attack_inputs_main.many_threads(n)) for n in (10_000, 40_000)),
]

# issue #27 (round 3): the attacks, then one class of our own per item ("own: ...")
ROUND3 = [
    Attack("27.1", "Kineto rank + Nsight rank in one directory", attack_inputs_round3.mixed_clocks("kineto+nsys")),
    Attack("27.1", "two Kineto ranks, one without baseTimeNanoseconds",
           attack_inputs_round3.mixed_clocks("kineto without base")),
    Attack("27.1", "own: two Nsight exports of two sessions", attack_inputs_round3.mixed_clocks("two sessions")),
    Attack("27.2", "epoch us with ns decimals", attack_inputs_round3.epoch_decimals(False)),
    Attack("27.2", "own: epoch us as d.ddd...e15", attack_inputs_round3.epoch_decimals(True)),
    *(Attack("27.3", f"Nsight: {c} (--strict)", attack_inputs_round3.nsys_processes(c))
      for c in ("two VMs", "NULL globalPid", "dangling nameId")),
    Attack("27.3", "Kineto B/E pair for a sync (--strict)", attack_inputs_round3.kineto_begin_end),
    Attack("27.3", "own: Nsight globalPid with bit 63 set (--strict)",
           attack_inputs_round3.nsys_processes("top bit")),
    *(Attack("27.4", c, attack_inputs_round3.output_over_input(c)) for c in (
        "report -o X", "report --html X", "whatif -o X", "report D -f json -o D/report.json",
        "ab-report D --html D/ab.json")),
    Attack("27.4", "own: -o a hard link to the trace", attack_inputs_round3.output_over_input("hard link")),
    Attack("27.5", "ab page: script in a failed run's index",
           attack_inputs_round3.ab_case("script in a failed run's index")),
    Attack("27.5", "own: ab page: script in the command", attack_inputs_round3.ab_case("script in the command")),
    Attack("27.6", "nsys export command: shell syntax in the file name",
           attack_inputs_round3.nsys_command("shell syntax")),
    Attack("27.6", "own: nsys export command: newline in the file name",
           attack_inputs_round3.nsys_command("newline")),
    Attack("27.7", "symlinked ab.json", attack_inputs_round3.ab_case("symlinked ab.json")),
    Attack("27.7", "own: hard-linked ab.json", attack_inputs_round3.ab_case("hard-linked ab.json")),
    *(Attack("27.8", c, attack_inputs_round3.ab_case(c)) for c in ("ab.json a FIFO",
                                                  "ab.json a link to /dev/zero")),
    Attack("27.8", "own: ab.json a directory", attack_inputs_round3.ab_case("ab.json a directory")),
    Attack("27.9", "10 MB annotation name around 400 syncs", attack_inputs_round3.long_label("kineto")),
    Attack("27.9", "own: 10 MB NVTX range around 400 syncs (Nsight)", attack_inputs_round3.long_label("nsys")),
    Attack("27.10", "160k kernels, each on its own device", attack_inputs_round3.many_devices("devices")),
    Attack("27.10", "own: 160k kernels, each on its own stream", attack_inputs_round3.many_devices("streams")),
    *(Attack("27.11/14/18", f"ab.json: {c}", attack_inputs_round3.ab_tampered(c)) for c in (
        "rounds 10**7", "rounds -3", "negative step times", "a round as a string",
        "no device policy")),
    Attack("27.11", "own: ab.json: 10^5 policies", attack_inputs_round3.ab_tampered("10^5 policies")),
    Attack("27.14", "own: ab.json: NaN in a step time", attack_inputs_round3.ab_tampered("NaN in a step time")),
    Attack("27.12", "--step-range re:(a+)+$ on a 34-character name", attack_inputs_round3.regex("(a+)+$")),
    Attack("27.12", "own: --step-range re:(x+x+)+y over 20k names", attack_inputs_round3.regex("many")),
    Attack("27.13", "run.json nested 800 deep (report --html)", attack_inputs_round3.deep_run_json("report")),
    Attack("27.13", "run.json nested 800 deep (compare --html)", attack_inputs_round3.deep_run_json("compare")),
    Attack("27.13", "own: run.json with a list nested 900 deep", attack_inputs_round3.deep_run_json("list")),
    Attack("27.15", "--tolerance-us 1e16", attack_inputs_round3.cli_number(["report", "--tolerance-us", "1e16"])),
    Attack("27.15", "whatif --unprofiled 1e308 -f json",
           attack_inputs_round3.cli_number(["whatif", "--unprofiled", "1e308", "-f", "json"])),
    Attack("27.15", "whatif --unprofiled nan", attack_inputs_round3.cli_number(["whatif", "--unprofiled", "nan"])),
    Attack("27.15", "own: --max-decompressed 10^23 G",
           attack_inputs_round3.cli_number(["report", "--max-decompressed", "9" * 23 + "G"])),
    Attack("27.16", "ESC in a policy name (OUTPUTS DIFFER)",
           attack_inputs_round3.ab_escapes("ESC in a policy name (OUTPUTS DIFFER)")),
    Attack("27.16", "own: bidi override and ESC in the ab directory's name",
           attack_inputs_round3.ab_escapes("dir")),
    *(Attack("27.17", f"{c} named like a trace (--strict)", attack_inputs_round3.skipped_entry(c))
      for c in ("a FIFO", "a dangling link", "a link to /dev/zero")),
    Attack("27.17", "own: a socket named like a trace (--strict)", attack_inputs_round3.skipped_entry("socket")),
    Attack("27.18", "-o - (JSON to stdout)", attack_inputs_round3.dash_output("-o")),
    Attack("27.18", "own: --html - (the page to stdout)", attack_inputs_round3.dash_output("--html")),
]
ATTACKS += ROUND3

# issue #40 (round 4), items 1-4, 9, 18, 19, 21, 22, 24; "own: ..." is one of our own per class
ROUND4 = [
    *(Attack("40.1", c, attack_inputs_round4.over_run_json(c)) for c in (
        "report RUN/kineto -f json -o RUN/run.json", "whatif RUN/kineto -o RUN/run.json",
        "report RUN/kineto --html RUN/run.json", "own: -o a hard link to run.json")),
    *(Attack("40.2", c, attack_inputs_round4.nsys_twin(c)) for c in (
        "report X.sqlite -o X.nsys-rep", "report X.nsys-rep -o X.sqlite",
        "own: report X.sqlite -o X.sqlite-wal")),
    Attack("40.3", "ab-report keeps unknown top-level fields", attack_inputs_round4.ab_unknown_fields),
    *(Attack("40.4", c, attack_inputs_round4.two_outputs(c)) for c in (
        "-o X --html X", "-o - --html -", "own: -o X --html LINK-TO-X")),
    *(Attack("40.9", c, attack_inputs_round4.named_twice(c)) for c in (
        "report f d/./f", "report DIR DIR/f", "own: report f HARDLINK-TO-f")),
    *(Attack("40.18", f"run.json: {c}", attack_inputs_round4.run_json_number(c)) for c in (
        "401-digit step_us", "own: 1e400 step_us")),
    *(Attack("40.19", f"whatif --unprofiled {v} -f json", attack_inputs_round4.tiny_unprofiled(v))
      for v in ("1e-308", "5e-324")),
    Attack("40.19", "own: whatif --unprofiled-ci 1e-308,1 -f json",
           attack_inputs_round4.tiny_unprofiled("1e-308,1", "--unprofiled-ci")),
    *(Attack("40.19", c, attack_inputs_round4.ab_number(c)) for c in (
        "ab.json step times 5e-324", "ab.json step times 3.6e9 against 5e-324",
        "own: ab.json stored what-if predicted 1e-310")),
    *(Attack("40.21", f"ab.json: {c}", attack_inputs_round4.ab_whatif(c)) for c in (
        "stored what-if empty", "stored what-if predicted a string",
        "own: stored what-if a list of ranks as a string")),
    Attack("40.22", "ab.json of 1e7 step times", attack_inputs_round4.ab_huge(10_000_000)),
    Attack("40.22", "own: ab.json of 2.9e7 step times", attack_inputs_round4.ab_huge(29_000_000)),
    *(Attack("40.24", c, attack_inputs_round4.ab_zero_steps(c)) for c in (
        "zero-step ab.json", "own: one policy without steps")),
]
ATTACKS += ROUND4
# issue #40 (round 4): trace oddities, --dask addresses, the window's barrier, mixed sources
ROUND4_TRACES = [
    *(Attack("40.8", f"Nsight profplug.step range {c}", attack_inputs_round4_traces.nvtx_step(c))
      for c in ("ends at 2^63-1", "spans -2^63..2^63-1", "10 hours long")),
    *(Attack("40.10", f"Kineto {c}", attack_inputs_round4_traces.kineto_steps(c))
      for c in ('kernel args.device "0"', 'kernel args.stream "7"')),
    Attack("40.11", "Kineto one correlation id for all", attack_inputs_round4_traces.kineto_steps(
        "one correlation id for all")),
    Attack("40.12", "Kineto GPU clock 2 h early", attack_inputs_round4_traces.kineto_steps("GPU clock 2 h early")),
    Attack("40.13", "--dask a server that accepts and never answers",
           attack_inputs_round4_traces.dask_address("silent server")),
    *(Attack("40.17", f"--dask {a}", attack_inputs_round4_traces.dask_address(a)) for a in (
        "tcp://", "tcp://:abc", "tcp://127.0.0.1:", "tls://127.0.0.1:8786",
        "ucx://127.0.0.1:8786", "inproc://x", "tcp://127.0.0.1:99999")),
    *(Attack("40.17", f"--dask scheduler file {c}", attack_inputs_round4_traces.dask_address(f"file:{c}"))
      for c in ("garbage", "{}", '{"address": 5}', "[]", "missing")),
    Attack("40.15", "--step-fn torch.distributed:send, called on rank 0 only",
           attack_inputs_round4_traces.send_only_on_rank0),
    Attack("40.25", "Kineto rank + Nsight rank, -f json", attack_inputs_round4_traces.mixed_sources),
]
ATTACKS += ROUND4_TRACES
# issue #40 (round 4), the cache's items: each builder fills a --cache with a first run,
# changes a trace or the cache, and the second run is measured
ROUND4_CACHE = [
    Attack("40.5", "hot WAL gains a kernel after the cached report (--cache)",
           attack_inputs_cache.wal_gains_rows("export")),
    Attack("40.5", "own: a .nsys-rep read through its export, whose WAL gains a kernel",
           attack_inputs_cache.wal_gains_rows("report")),
    Attack("40.6", "4 MB trace edited mid-file, size and mtime kept (--cache)", attack_inputs_cache.mid_edit(4)),
    Attack("40.6", "own: 300 MB trace edited mid-file, size and mtime kept (--cache)",
           attack_inputs_cache.mid_edit(300)),
    Attack("40.7", "another trace's entry copied under this trace's key",
           attack_inputs_cache.foreign_entry("npz")),
    Attack("40.7", "own: another file's kept stall analyses copied under this one's key",
           attack_inputs_cache.foreign_entry("ranks")),
    Attack("40.14", "a FIFO under a cache entry's name", attack_inputs_cache.fifo_entry("npz")),
    Attack("40.14", "own: FIFOs under the ranks- and run- entries' names",
           attack_inputs_cache.fifo_entry("results")),
    Attack("40.16", "report D --cache D/.cache, second run", attack_inputs_cache.cache_inside("in use")),
    Attack("40.16", "own: another run's cache inside D, --cache elsewhere",
           attack_inputs_cache.cache_inside("left by another run")),
    *(Attack("40.20", f"cache entry with {c}", attack_inputs_cache.bad_entry(c)) for c in attack_inputs_cache.NPZ_TAMPER),
    Attack("40.20", "own: kept stall analyses with gap causes outside CAUSES",
           attack_inputs_cache.bad_entry("gap causes")),
]
ATTACKS += ROUND4_CACHE


def run(attack: Attack, timeout: float, mem_gb: float, pythonpath: str = "") -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="profplug-attack-") as tmp:
        d = Path(tmp)
        args = attack.build(d)
        before = {str(p.relative_to(d)) for p in d.rglob("*")}
        limit = int(mem_gb * (1 << 30))

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            os.setsid()

        env = {**os.environ, **attack.env, "TMPDIR": str(d)}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "profplug", *args], cwd=d, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=limits)
        try:
            out, err = proc.communicate(timeout=timeout)
            status = str(proc.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            status = f"> {timeout:g} s"
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        text = err.decode(errors="replace").strip() or out.decode(errors="replace").strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        last = (lines[-1] if lines else "").replace(tmp, "<dir>")
        left = sorted(str(p.relative_to(d)) for p in d.rglob("*")
                      if str(p.relative_to(d)) not in before)
        return {"item": attack.item, "attack": attack.name, "exit": status,
                "wall_s": round(wall, 2), "rss_mb": round(rss), "traceback":
                "Traceback" in text, "last": last[:140], "new_files": left}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--round3", action="store_true", help="only the attacks of issue #27")
    ap.add_argument("--round4", action="store_true", help="only the attacks of issue #40")
    ap.add_argument("--cache40", action="store_true",
                    help="only the cache attacks of issue #40")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--mem-gb", type=float, default=4.0)
    ap.add_argument("--pythonpath", default="", help="source tree to run instead")
    a = ap.parse_args()
    print("| item | attack | exit | wall s | peak RSS MB | traceback | new files | last line |")
    print("| --- | --- | --- | ---: | ---: | --- | --- | --- |")
    chosen = ROUND3 if a.round3 else ROUND4 + ROUND4_TRACES + ROUND4_CACHE if a.round4 \
        else ROUND4_CACHE if a.cache40 else ATTACKS
    for attack in chosen:
        if a.only.lower() not in attack.name.lower():
            continue
        # each in its own process so that RUSAGE_CHILDREN is this attack's own peak
        r = subprocess.run([sys.executable, __file__, "--one", attack.name, "--timeout",
                            str(a.timeout), "--mem-gb", str(a.mem_gb), "--pythonpath",
                            a.pythonpath], capture_output=True, text=True)
        print(r.stdout.strip() or f"| {attack.item} | {attack.name} | runner failed: "
              f"{r.stderr.strip().splitlines()[-1:]} |", flush=True)


def one(name: str, timeout: float, mem_gb: float, pythonpath: str) -> None:
    attack = next(x for x in ATTACKS if x.name == name)
    r = run(attack, timeout, mem_gb, pythonpath)
    last = str(r["last"]).replace("|", "/").replace("`", "'")
    print(f"| {r['item']} | {r['attack']} | {r['exit']} | {r['wall_s']} | {r['rss_mb']} | "
          f"{'yes' if r['traceback'] else 'no'} | {' '.join(map(str, r['new_files'])) or '-'} | "
          f"`{last}` |")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        ap = argparse.ArgumentParser()
        ap.add_argument("--one")
        ap.add_argument("--timeout", type=float)
        ap.add_argument("--mem-gb", type=float)
        ap.add_argument("--pythonpath", default="")
        x = ap.parse_args()
        one(x.one, x.timeout, x.mem_gb, x.pythonpath)
    else:
        main()
