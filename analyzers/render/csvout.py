"""CSV renderer: one row per rank (the columns of ``ranks_frame``, times in us)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import Report


def render_csv(rep: Report, out: TextIO) -> None:
    from profplug.analyzers.report.analysis import ranks_frame

    ranks_frame(rep).to_csv(out, index=False, lineterminator="\n")
