"""Terminal table of a what-if against a measured run (``whatif --against``, ``compare``).

Per rank: predicted step (its band) vs the measured step, the error, whether the measured
step is inside the band, the finding (where they part most), then the segments between the
anchors (``whatif/against.py``). Times in us per step (medians over the steady steps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from profplug.analyzers.render.text import wrap
from profplug.analyzers.render.whatif_table import render_whatif_table

if TYPE_CHECKING:
    from profplug.analyzers.whatif.against import AgainstResult, WhatIfAgainst

WIDTH = 80


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _lines(text: str, first: str = "", indent: str = "  ") -> str:
    return "".join(line + "\n" for line in wrap(text, WIDTH, initial_indent=first,
                                                subsequent_indent=indent))


def render_against_table(res: AgainstResult, out: TextIO, top: int | None = None) -> None:
    """The against section; ``top``: only that many segments per rank (largest first)."""
    w = out.write
    w(_lines(f"against {res.label} (measured): the prediction lined up with it by call"))
    for msg in res.warnings:
        w(_lines(msg, "warning: "))
    w(f"{'rank':>4} {'predicted':>10} {'+-%':>5} {'measured':>10} {'err%':>6} {'inside':>6} "
      f"{'host pred':>10} {'host meas':>10} {'steps':>5}\n")
    for r in res.ranks:
        err = "-" if r.error_pct is None else f"{r.error_pct:+.1f}"
        inside = "-" if r.inside is None else ("yes" if r.inside else "no")
        band = "-" if r.band_pct is None else f"{r.band_pct:.1f}"
        w(f"{r.rank:>4} {_n(r.predicted_us):>10} {band:>5} {_n(r.measured_us):>10} "
          f"{err:>6} {inside:>6} {_n(r.predicted_host_us):>10} {_n(r.measured_host_us):>10} "
          f"{r.n_steps:>5}\n")
    w("(us per step; predicted/measured: the report's step time, the GPU period; +-%:\n"
      "the band for a separate traced run, which inside judges; host: step start to\n"
      "the next step's start; medians over the steady steps lined up by index; diff =\n"
      "predicted - measured)\n")
    for r in res.ranks:
        finding = r.finding()
        if finding is None:
            continue
        w("\n" + _lines(finding))
        segs = r.top(top) if top else r.segments
        w(f"  {'predicted':>10} {'measured':>10} {'diff':>10}  "
          f"{'segment' + (f' (top {top})' if top else '')}\n")
        for s in segs:
            w(_lines(s.where(r.repeated),
                     f"  {_n(s.predicted_us):>10} {_n(s.measured_us):>10} "
                     f"{s.diff_us:>+10,.1f}  ", " " * 36))


def render_whatif_against_table(res: WhatIfAgainst, out: TextIO) -> None:
    """``whatif --against``: the what-if as without it, then the against section."""
    render_whatif_table(res.whatif, out)
    out.write("\n")
    render_against_table(res.against, out)
