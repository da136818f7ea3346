"""Terminal table of an A/B: the verdicts first, then per policy median step and CI, speedup
and CI, per rank, the output check, the what-if, failed runs. Fits an 80-column terminal; times in us per step.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.ab.overlay import line as whatif_line
from profplug.analyzers.render.text import wrap

if TYPE_CHECKING:
    from profplug.analyzers.ab.result import AbResult

WIDTH = 80
CLOCKS = MappingProxyType({"cuda_event": "CUDA events", "host": "host wall time", "mixed": "mixed clocks"})


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _ci(ci: list[float] | None, fmt: str = ",.0f") -> str:
    return "-" if not ci else f"{format(ci[0], fmt)}-{format(ci[1], fmt)}"


def _wrap(text: str, first: str = "", indent: str = "  ") -> list[str]:
    return wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent) or [first]


def digested_in_window(res: AbResult) -> int:
    """Steps of the reference run's timed window (``skip`` .. ``skip + steps - 1``) that
    carry a digest on some rank: 0 for runs of a profplug that digests outside the window
    only; older runs digested every step (their records say so through the step numbers)."""
    ref = next((r for r in res.runs if r.get("index") == res.outputs.reference_run), None)
    if ref is None or res.skip is None or not res.steps:
        return 0
    window = range(res.skip, res.skip + res.steps)
    steps = {i for k in ref.get("ranks", []) for i, d in enumerate(k.get("step_digests") or [])
             if d is not None and i in window}
    return len(steps)


def outputs_line(res: AbResult) -> str:
    o = res.outputs
    if o.identical is None:
        return f"outputs: not checked ({o.note})"
    if o.identical:
        steps = f"{o.digested_steps} step{'s' if o.digested_steps != 1 else ''}"
        inside = digested_in_window(res)
        where = ("outside the timed window " if not inside else "")
        tail = ("" if not inside else f", {inside} of them inside the timed window: runs "
                "from before digests left it, their timed steps include the digest kernels")
        return (f"outputs: identical in all {o.compared_runs} successful runs "
                f"({steps} {where}digested on every rank{tail})")
    return (f"outputs: DIFFER in {len(o.mismatches)} of {o.compared_runs} runs: "
            f"{o.mismatches[0].line()}")


def design_lines(res: AbResult) -> list[str]:
    """The design's own lines: the position effect (separate runs), or what the steps after
    a switch cost (switched: each offset's step over its block's, the first 4 offsets)."""
    out = []
    if res.position_effect is not None and res.position_effect.get("line"):
        out.append(res.position_effect["line"])
    if res.after_switch:
        parts = [f"{label} " + " ".join("-" if x is None else f"{x:.2f}" for x in v[:4])
                 for label, v in res.after_switch.items()]
        out.append("after a switch (step / its block's step, offsets 0-3): "
                   + "; ".join(parts) + f" (the first {res.discard_after_switch} left out)")
    return out


def render_ab_table(res: AbResult, out: TextIO) -> None:
    """The terminal view of an A/B."""
    w = out.write
    _header(res, w)
    for s in res.summary:  # the answer first, then the table it comes from
        if s.verdict:
            for ln in _wrap(s.verdict, "verdict: ", "  "):
                w(ln + "\n")
    w("\n")
    _policies(res, w)
    if any(len(s.ranks) > 1 for s in res.summary):
        _ranks(res, w)
    w("\n")
    _notes(res, w)


def _header(res: AbResult, w: Callable[[str], object]) -> None:
    """What was run: the policies, rounds, order, the timed window and the clock."""
    order = f"random order (seed {res.seed})" if res.order == "random" else res.order
    if res.design == "switched":
        order = (f"switched every {res.switch_every} steps inside each run, block order "
                 "counterbalanced")
    unit = "runs" if res.design == "switched" else "rounds"
    w(f"profplug ab: {' vs '.join(res.policies)}, {res.rounds} {unit}, {order}\n")
    window = (f"steps {res.skip}..{res.skip + res.steps - 1} of each run"
              if res.skip is not None and res.steps else "each run's window")
    for ln in _wrap(f"{len(res.runs)} runs, {len(res.failed_runs)} failed; {window}; step "
                    f"time: {CLOCKS.get(res.clock, res.clock)}, per step the slowest rank",
                    "", ""):
        w(ln + "\n")


def _policies(res: AbResult, w: Callable[[str], object]) -> None:
    """Per policy: rounds ok, median step and CI (us), speedup over device and CI."""
    w(f"{'policy':<8} {'ok':>5} {'median us':>11} {'95% CI us':>17} {'speedup':>8} "
      f"{'95% CI':>13}\n")
    for s in res.summary:
        ok = f"{s.rounds_ok}/{s.rounds}"
        sp = "1.00x" if s.policy == "device" else (
            "-" if s.speedup_vs_device is None else f"{s.speedup_vs_device:.2f}x")
        spci = "" if s.policy == "device" else _ci(s.speedup_ci95, ".2f") + (
            "x" if s.speedup_ci95 else "")
        w(f"{s.policy:<8} {ok:>5} {_us(s.median_step_us):>11} {_ci(s.ci95_us):>17} "
          f"{sp:>8} {spci:>13}\n")
    if res.design == "switched":
        w(f"(per run each policy's robust step over its blocks, the first "
          f"{res.discard_after_switch} steps\n of each block left out; median over runs; "
          "speedup CI: t on the runs' log ratios)\n")
    else:
        w("(median over rounds of each run's median step; CI: bootstrap over rounds;\n"
          " speedup CI paired by round: the wider of bootstrap and t on log ratios)\n")


def _ranks(res: AbResult, w: Callable[[str], object]) -> None:
    """Per rank and policy: the median step and its CI (us)."""
    w(f"\n{'rank':>4} {'policy':<8} {'median us':>11} {'95% CI us':>17}\n")
    for rank in sorted({k.rank for s in res.summary for k in s.ranks}):
        for s in res.summary:
            k = next((k for k in s.ranks if k.rank == rank), None)
            if k is not None:
                w(f"{rank:>4} {s.policy:<8} {_us(k.median_step_us):>11} "
                  f"{_ci(k.ci95_us):>17}\n")


def _notes(res: AbResult, w: Callable[[str], object]) -> None:
    """The output check, design notes, what-if, failed runs and warnings."""
    lines = [*_wrap(outputs_line(res))]
    for line in [*res.not_reached, *design_lines(res)]:
        lines += _wrap(line)
    if res.stopped:
        lines += _wrap(f"stopped: {res.stopped}")
    if res.whatif is not None:
        lines += _wrap(whatif_line(res.whatif))
    for r in res.failed_runs:
        why = "; ".join(r.get("reasons") or []) or f"exit status {r.get('exit_status')}"
        lines += _wrap(f"failed: run {r['index']} (round {r['round']}, {r['policy']}): {why}")
    if res.interrupted:
        lines.append("interrupted: the remaining runs were not started")
    for msg in res.warnings:
        lines += _wrap(msg, "warning: ", "  ")
    for ln in lines:
        w(ln + "\n")
