"""Terminal table of a comparison: per rank, both runs and the delta (b - a), 80 columns.

Times in us; idle by cause per step when both runs have steps, else over the whole window.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.compare.noise import shown_diff_us
from profplug.analyzers.render.against_table import render_against_table
from profplug.analyzers.render.text import PrintableWriter
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.result import GPU_TIME_FIELDS

if TYPE_CHECKING:
    from profplug.analyzers.compare.reports import Comparison, RankComparison, RankSide

LABEL_W = 14


def _n(x: float | None, count: bool = False) -> str:
    if x is None:
        return "-"
    return f"{int(x):,}" if count else f"{x:,.1f}"


def _d(x: float | None, count: bool = False) -> str:
    if x is None:
        return "-"
    return f"{int(x):+,}" if count else f"{x:+,.1f}"


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _rows(rc: RankComparison) -> list[tuple[str, float | None, float | None, float | None]]:
    """(label, A, B, B - A) per row; a time's B - A is that of the two values as printed."""
    a, b = rc.a, rc.b
    per_step = (a is not None and b is not None and a.idle_per_step_us is not None
                and b.idle_per_step_us is not None)

    def get(side: RankSide | None, key: str) -> float | None:
        if side is None:
            return None
        if key == "step_us":
            return side.step_us
        if key.startswith("idle:"):
            c = key[5:]
            if per_step and side.idle_per_step_us is not None:
                return side.idle_per_step_us[c]
            return side.idle_by_cause_us[c]
        if key.startswith("n:"):
            return float(side.sync_counts.get(key[2:], 0))
        return float(getattr(side.gpu if key in GPU_TIME_FIELDS else side, key))

    unit = "/step" if per_step else " total"
    spec = [("step us", "step_us"), ("window us", "window_us"), ("idle us", "idle_us")]
    spec += [(f"{c}{unit}", f"idle:{c}") for c in CAUSES]
    spec += [("stream wait us", "stream_wait_us"), ("host blocked us", "host_blocked_us"),
             ("device syncs", "n:device"), ("event syncs", "n:event"),
             ("stream waits", "n:stream_wait")]
    out = []
    for label, key in spec:
        va, vb = get(a, key), get(b, key)
        count = label.endswith(("syncs", "waits"))
        out.append((label, va, vb, None if va is None or vb is None else
                    vb - va if count else shown_diff_us(va, vb)))
    return out


def _wrap(text: str) -> str:
    """``text`` in lines of at most 80 columns, continuation lines indented, newline-ended."""
    return "\n".join(textwrap.wrap(text, 80, subsequent_indent="  ",
                                    break_on_hyphens=False)) + "\n"


def _clauses(text: str) -> list[str]:
    """``text`` split at each "; " outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    return [*out, text[start:]]


def render_compare_table(cmp: Comparison, out: TextIO) -> None:
    out = PrintableWriter(out)  # type: ignore[assignment]  # renderers only write(); run labels: no escapes
    w = out.write
    la, lb = _clip(cmp.label_a, LABEL_W), _clip(cmp.label_b, LABEL_W)
    w(f"profplug compare · A = {cmp.label_a} · B = {cmp.label_b}\n")
    for m in cmp.mismatches:  # before the answer: it may not mean what it seems
        w(_wrap(f"warning: {m}"))
    if cmp.answer is not None:
        w("\n" + _wrap(cmp.answer.sentence(cmp.label_a, cmp.label_b)))
    w(_wrap(f"step time: {cmp.verdict()}"))
    if cmp.noise is not None:
        n = cmp.noise
        w(_wrap(f"  ({cmp.steps_line()}; per-step spread (each step's slowest rank, "
                f"{n.basis}) ±{n.spread_a_us:,.1f} / ±{n.spread_b_us:,.1f} us; one run each: "
                "the run-to-run spread is not in it, `profplug ab` measures it)"))
    if cmp.against is not None:  # A's what-if lined up with B: the top segments per rank
        w("\n")
        render_against_table(cmp.against, out, top=3)
    w("\ntimes in us; delta = B - A; idle by cause per step when both runs have steps\n")
    w("\nverdict per rank\n")
    for rc in cmp.ranks:
        head = f"  rank {rc.rank}: "
        parts = _clauses(rc.verdict(cmp.label_a, cmp.label_b))
        for i, part in enumerate(parts):  # a clause a line, each wrapped at 80 columns
            w("\n".join(textwrap.wrap(part + (";" if i < len(parts) - 1 else ""), 80,
                                      initial_indent=head if i == 0 else " " * len(head),
                                      subsequent_indent=" " * len(head),
                                      break_on_hyphens=False)) + "\n")
    for rc in cmp.ranks:
        w(f"\n── rank {rc.rank} " + "─" * (80 - 9 - len(str(rc.rank))) + "\n")
        w(f"{'':<22} {la:>{LABEL_W}} {lb:>{LABEL_W}} {'delta':>{LABEL_W}}\n")
        for label, va, vb, d in _rows(rc):
            c = label.endswith(("syncs", "waits"))
            w(f"{label:<22} {_n(va, c):>{LABEL_W}} {_n(vb, c):>{LABEL_W}} "
              f"{_d(d, c):>{LABEL_W}}\n")
