"""A run without GPU work: its table and its page section (``HostOnlyResult``): per rank the
host step times, the p2p calls and the syncs issued. Times in us."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.render.escape import e

if TYPE_CHECKING:
    from profplug.analyzers.stalls.hostonly import HostOnlyResult, HostRank

INTRO = ("Host side only (no kernel, memcpy or memset recorded: a CPU run, GPU activity not "
         "recorded, or a window that held no step): what the traces hold, per rank, on the "
         "host clock")


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in d.items() if v) or "none"


def _cells(r: HostRank) -> list[str]:
    out = [str(r.rank), r.source, f"{r.n_steps:,}", _n(r.step_us), _n(r.step_min_us),
           _n(r.step_max_us), _counts(r.p2p_calls), _counts(r.syncs_issued)]
    return out


HEAD = ("rank", "source", "steps", "step us", "min us", "max us", "p2p calls", "syncs issued")


def render_hostonly_table(res: HostOnlyResult, out: TextIO) -> None:
    w = out.write
    w("\n".join(textwrap.wrap(INTRO + f" (step us: {res.statistic} over non-outlier steps)",
                             80)) + "\n")
    for r in res.ranks:
        c = _cells(r)
        w(f"  rank {c[0]} ({c[1]}): {c[2]} steps, step {c[3]} us (min {c[4]}, max {c[5]})\n"
          f"    p2p calls: {c[6]}; syncs issued: {c[7]}\n")
        if r.outlier_steps:
            w(f"    outlier steps: {', '.join(map(str, r.outlier_steps))}\n")


def render_hostonly_html(res: HostOnlyResult, out: TextIO) -> None:
    th = "".join(f'<th class="t">{e(h)}</th>' for h in HEAD)
    rows = "".join("<tr>" + "".join(f'<td class="t">{e(c)}</td>' for c in _cells(r)) + "</tr>"
                   for r in res.ranks)
    out.write(f'<section id="host-only"><h2>Host side</h2><p class="sub">{e(INTRO)} (step us: '
              f"{e(res.statistic)} over non-outlier steps).</p><table id=\"host\"><thead><tr>"
              f"{th}</tr></thead><tbody>{rows}</tbody></table></section>")
