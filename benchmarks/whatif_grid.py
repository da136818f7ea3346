"""The what-if validation grid: capture on a GPU machine, then compare offline.

    # on the GPU machine (profplug and its wheels installed, examples/ at hand):
    python3 benchmarks/whatif_grid.py capture --out /tmp/grid --budget-s 520
    # anywhere: predicted (whatif on each device run) vs measured (event runs)
    python3 benchmarks/whatif_grid.py table /tmp/grid [--samples sample_traces] [--markdown]

``capture`` runs ``examples/decode_loop.py`` (stages of bf16 GELU(x @ W) layers; one GPU:
stages hand activations over on a communication stream, ``device`` adds Megatron's
``torch.cuda.synchronize()``) over a grid of shapes from launch-bound to GPU-bound, under
``profplug run`` with Kineto and Nsight, policies ``device`` and ``event``, several repeats,
interleaved (repeat-major, the policy order alternating), until ``--budget-s`` runs out:
every shape gets its k-th repeat before any gets its (k+1)-th. ``--traces none`` adds runs
without a profiler (their printed step time is the unprofiled ground truth that
``table`` checks ``--unprofiled`` predictions against); ``--traces ab`` runs ``profplug ab``
per shape into ``DIR/ab/<shape>/`` (device and event, ``--ab-rounds`` interleaved rounds,
CUDA-event step times, bootstrap CIs: the ground truth of issue 16's table). Each run's
command, exit status, wall time and printed step time go to ``DIR/manifest.json``.

``table`` prints issue 16's validation table (``grid_ab.py``: per profiler and shape, the
profiled prediction against the traced event runs and the ``--unprofiled`` one against ab),
then the per-repeat detail (``grid_table.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "decode_loop.py"


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int  # per stage
    batch: int
    stages: int = 2

    @property
    def name(self) -> str:
        return f"h{self.hidden}_l{self.layers}_b{self.batch}_s{self.stages}"

    def args(self) -> list[str]:
        return ["--hidden", str(self.hidden), "--layers", str(self.layers),
                "--batch", str(self.batch), "--stages", str(self.stages)]


# From launch-bound (small hidden) to GPU-bound (hidden 16384: 512 MB of weights a layer).
GRID = (
    Shape(512, 8, 8), Shape(1024, 8, 8), Shape(2048, 8, 8), Shape(4096, 8, 8),
    Shape(8192, 8, 8), Shape(16384, 8, 8), Shape(4096, 4, 64), Shape(1024, 16, 1),
)
POLICIES = ("device", "event")
# Held out of tuning (docs/whatif.md, Validation; also grid_ab.HELD_OUT).
HELD_OUT = ("h2048_l8_b8_s2", "h8192_l8_b8_s2", "h1024_l16_b1_s2")
DOC_BEGIN, DOC_END = "<!-- whatif_grid table: begin -->", "<!-- whatif_grid table: end -->"
SWITCH_BEGIN = "<!-- whatif_grid switch-table: begin -->"
SWITCH_END = "<!-- whatif_grid switch-table: end -->"
SHAPE_RE = re.compile(r"^h(\d+)_l(\d+)_b(\d+)_s(\d+)$")


def parse_shape(name: str) -> Shape:
    """``h4096_l8_b8_s2`` -> Shape(4096, 8, 8, 2): any shape, not only the grid's."""
    m = SHAPE_RE.match(name.strip())
    if not m:
        raise SystemExit(f"whatif_grid: bad shape name {name!r} (h<hidden>_l<layers>_b<batch>"
                         "_s<stages>)")
    return Shape(*(int(g) for g in m.groups()))
STEP_RE = re.compile(r"mean_step_us=([0-9.]+)")


def _run(cmd: list[str], log: Path, env: dict[str, str], timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        with open(log, "w") as fh:
            p = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                               timeout=timeout, check=False)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = 124
    text = log.read_text(errors="replace")
    m = STEP_RE.search(text)
    return {"cmd": cmd, "exit": rc, "wall_s": round(time.perf_counter() - t0, 2),
            "printed_step_us": float(m.group(1)) if m else None, "log": log.name}


def capture(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    shapes = [parse_shape(n) for n in args.shapes.split(",")] if args.shapes else list(GRID)
    traces = [t for t in args.traces.split(",") if t]
    manifest = out / "manifest.json"
    runs: list[dict] = json.loads(manifest.read_text())["runs"] if manifest.is_file() else []

    def save() -> None:
        manifest.write_text(json.dumps({"grid": [asdict(s) for s in shapes], "runs": runs},
                                       indent=1))

    bind = ["taskset", "-c", args.cpu_bind] if args.cpu_bind else []
    if args.no_aslr:  # every process (and its children) with the same address layout
        bind = ["setarch", platform.machine(), "-R", *bind]
    # -P: the installed profplug, not the checkout's profplug/ in the working directory
    profplug = [sys.executable, "-P", "-m", "profplug"]
    pp = [*bind, *profplug, "run"]
    job = [sys.executable, str(EXAMPLE)] if args.nproc <= 1 else [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.nproc),
        str(EXAMPLE)]
    for rep in range(args.first_repeat, args.first_repeat + args.repeats):
        for trace in traces:
            for shape in shapes:
                order = POLICIES if (rep + shapes.index(shape)) % 2 == 0 else POLICIES[::-1]
                for policy in order:
                    left = deadline - time.monotonic()
                    if left < 20:
                        save()
                        print(f"grid: budget spent before {trace} rep {rep} {shape.name}",
                              flush=True)
                        return 0
                    name = f"{trace}/{shape.name}/{policy}/r{rep}"
                    d = out / name
                    if trace.endswith("-switch"):  # both policies in one traced process
                        if policy != order[0]:
                            continue
                        other = order[1]
                        name = f"{trace}/{shape.name}/{policy}-first/r{rep}"
                        d = out / name
                        at, end = args.skip + args.window, args.skip + 2 * args.window
                        cmd = [*pp, "-o", str(d), "--trace", trace.removesuffix("-switch"),
                               "--sync", policy, "--skip", str(args.skip), "--steps",
                               str(2 * args.window), "--no-report", "--force"]
                        if trace == "nsys-switch" and args.nsys:
                            cmd += ["--nsys", args.nsys]
                        cmd += ["--", *job, *shape.args(), "--steps", str(end + 10),
                                "--switch", f"{at}:{other}", "--timed", f"{args.skip}:{end}"]
                    elif trace == "ab":  # both policies in one ab run, once per shape
                        if policy != order[0] or (out / "ab" / shape.name / "ab.json").is_file():
                            continue
                        name, d = f"ab/{shape.name}", out / "ab" / shape.name
                        n = args.skip + args.ab_steps + 5
                        cmd = [*bind, *profplug, "ab", "-o", str(d),
                               "--policies", "device,event", "--rounds", str(args.ab_rounds),
                               "--skip", str(args.skip), "--steps", str(args.ab_steps),
                               "--force", "--", *job, *shape.args(), "--steps", str(n)]
                    elif trace == "none":  # no profiler: the step time users run at
                        n = args.skip + args.unprofiled_steps
                        cmd = [*bind, *job, *shape.args(), "--sync", policy, "--steps",
                               str(n), "--timed", f"{args.skip}:{n}"]
                    else:
                        cmd = [*pp, "-o", str(d), "--trace", trace, "--sync", policy,
                               "--skip", str(args.skip), "--steps", str(args.window),
                               "--no-report", "--force"]
                        if trace == "nsys" and args.nsys:
                            cmd += ["--nsys", args.nsys]
                        cmd += ["--", *job, *shape.args(),
                                "--steps", str(args.skip + args.window + 10),
                                "--timed", f"{args.skip}:{args.skip + args.window}"]
                    rec = _run(cmd, out / "logs" / (name.replace("/", "_") + ".txt"), env,
                               min(left, 180 if trace != "ab" else 540))
                    rec.update(trace=trace, shape=shape.name, policy=policy, repeat=rep,
                               dir=name)
                    runs.append(rec)
                    print(f"grid: {name} exit={rec['exit']} wall={rec['wall_s']}s "
                          f"step={rec['printed_step_us']}", flush=True)
                    save()
    save()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture", help="run the grid (GPU machine)")
    c.add_argument("--out", required=True)
    c.add_argument("--budget-s", type=float, default=520.0)
    c.add_argument("--repeats", type=int, default=3)
    c.add_argument("--traces", default="kineto,nsys",
                   help="comma list of kineto, nsys, none, ab, kineto-switch, nsys-switch "
                        "(none: the example without a profiler, its printed step time is the "
                        "unprofiled ground truth; ab: profplug ab per shape into "
                        "DIR/ab/<shape>/, the ground truth table reads; *-switch: one traced "
                        "process per shape running --window steps of each policy, the first "
                        "alternating, for switch-table)")
    c.add_argument("--ab-rounds", type=int, default=3, help="rounds of a --traces ab run")
    c.add_argument("--ab-steps", type=int, default=100, help="steps timed per ab run")
    c.add_argument("--unprofiled-steps", type=int, default=200,
                   help="steps timed in a --traces none run (after --skip)")
    c.add_argument("--cpu-bind", default="",
                   help="run every job under taskset -c CPUS (host speed was bimodal from "
                        "process to process on the 1-GPU VM)")
    c.add_argument("--no-aslr", action="store_true",
                   help="run every job under setarch -R (address-space randomization off: "
                        "benchmarks/host_modes.py)")
    c.add_argument("--shapes", default="", help="comma list of shape names, any "
                   "h<hidden>_l<layers>_b<batch>_s<stages> (default: the grid)")
    c.add_argument("--first-repeat", type=int, default=0,
                   help="number repeats from here (runs add to an existing manifest)")
    c.add_argument("--nproc", type=int, default=1,
                   help="processes (one stage per GPU, through torchrun); 1: all stages on "
                        "one GPU")
    c.add_argument("--skip", type=int, default=20)
    c.add_argument("--window", type=int, default=30)
    c.add_argument("--nsys", default=os.environ.get("NSYS"))
    t = sub.add_parser("table", help="predicted vs measured, offline (any machine)")
    t.add_argument("grid", nargs="*", help="capture directories (GRID/<profiler>/<shape>/...); "
                   "several are merged, repeats numbered apart with capture --first-repeat")
    t.add_argument("--samples", help="also the 2-rank device/event families of sample_traces/")
    t.add_argument("--ab", metavar="DIR", help="profplug ab ground truth, DIR/<shape>/ab.json "
                   "(default: GRID/ab/ or a sibling grid_ab/ of a grid)")
    t.add_argument("--held-out", default=",".join(HELD_OUT), metavar="SHAPES",
                   help="comma list of the shapes held out of tuning (reported apart)")
    t.add_argument("--markdown", action="store_true", help="a Markdown table (docs/whatif.md)")
    t.add_argument("--json", help="also write every number to this JSON file")
    t.add_argument("--update-doc", metavar="MD", help="put the Markdown table between the "
                   f"{DOC_BEGIN} / {DOC_END} markers of this file (docs/whatif.md)")
    w = sub.add_parser("switch-table", help="the what-if inside one process (*-switch runs)")
    w.add_argument("grid", nargs="+", help="capture directories with *-switch runs")
    w.add_argument("--held-out", default=",".join(HELD_OUT), metavar="SHAPES")
    w.add_argument("--markdown", action="store_true")
    w.add_argument("--json", help="also write every number to this JSON file")
    w.add_argument("--update-doc", metavar="MD", help="put the Markdown table between the "
                   f"{SWITCH_BEGIN} / {SWITCH_END} markers of this file (docs/whatif.md)")
    args = ap.parse_args(argv)
    if args.cmd == "capture":
        return capture(args)
    if args.cmd == "switch-table":
        return switch_table(args)
    return table(args)


def switch_table(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import io

    import grid_switch

    cells = grid_switch.collect([Path(g) for g in args.grid])
    if not cells:
        print("whatif_grid switch-table: no *-switch runs found", file=sys.stderr)
        return 1
    held = tuple(s for s in args.held_out.split(",") if s)
    grid_switch.render(cells, sys.stdout, held, markdown=args.markdown)
    if args.json:
        grid_switch.dump(cells, Path(args.json))
    if args.update_doc:
        buf = io.StringIO()
        grid_switch.render(cells, buf, held, markdown=True)
        doc = Path(args.update_doc)
        text = doc.read_text()
        a, b = text.find(SWITCH_BEGIN), text.find(SWITCH_END)
        if a < 0 or b < a:
            print(f"whatif_grid switch-table: {doc} has no {SWITCH_BEGIN} ... {SWITCH_END}",
                  file=sys.stderr)
            return 1
        cmd = " ".join(["python3 benchmarks/whatif_grid.py switch-table", *args.grid])
        doc.write_text(text[:a + len(SWITCH_BEGIN)] + f"\n<!-- generated by: {cmd} -->\n\n"
                       + buf.getvalue() + text[b:])
    return 0


def table(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import grid_ab
    import grid_table

    rows = []
    ab: dict = {}
    if args.grid:
        grids = [Path(g) for g in args.grid]
        ab = grid_ab.find_ab(grids, Path(args.ab) if args.ab else None)
        truth = {**grid_table.unprofiled_truth(grids), **grid_ab.ab_unprofiled(ab)}  # ab first
        rows += grid_table.build_rows(grid_table.grid_groups(grids), "grid", truth)
    if args.samples:
        rows += grid_table.build_rows(grid_table.sample_groups(Path(args.samples)), "samples",
                              grid_table.SAMPLE_UNPROFILED)
    if not rows:
        print("whatif_grid table: no device/event runs found", file=sys.stderr)
        return 1
    held = tuple(s for s in args.held_out.split(",") if s)
    cells = grid_ab.cells(rows, ab, held)

    def write(out: TextIO, markdown: bool) -> None:
        if cells:
            grid_ab.render(cells, out, markdown=markdown)
            for line in grid_ab.band_fit(rows, cells, held):
                out.write(("\n" if markdown else "") + line + "\n")
            out.write("\n" + ("Per repeat:\n\n" if markdown else ""))
        grid_table.render(rows, out, markdown=markdown)

    write(sys.stdout, args.markdown)
    if args.json:
        grid_table.dump(rows, Path(args.json))
        grid_ab.dump(cells, Path(args.json).with_suffix(".cells.json"))
    if args.update_doc:
        import io

        buf = io.StringIO()
        write(buf, True)
        doc = Path(args.update_doc)
        text = doc.read_text()
        a, b = text.find(DOC_BEGIN), text.find(DOC_END)
        if a < 0 or b < a:
            print(f"whatif_grid table: {doc} has no {DOC_BEGIN} ... {DOC_END}", file=sys.stderr)
            return 1
        cmd = " ".join(["python3 benchmarks/whatif_grid.py table", *args.grid,
                        *(["--ab", args.ab] if args.ab else []),
                        *(["--samples", args.samples] if args.samples else [])])
        doc.write_text(text[:a + len(DOC_BEGIN)] + f"\n<!-- generated by: {cmd} -->\n\n"
                       + buf.getvalue() + text[b:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
