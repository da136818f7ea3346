"""Options that several commands share (typer ``Annotated`` aliases), declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DEFAULT_TOLERANCE_US = 2.0  # stalls.DEFAULT_TOLERANCE_NS, in us

Output = Annotated[Path | None, typer.Option("-o", "--output",
                                             help="Write it here instead of stdout.")]
Html = Annotated[Path | None, typer.Option("--html", help="Also write an HTML report.")]
Tolerance = Annotated[float, typer.Option(
    "--tolerance-us", help="Clock slack when matching a gap to a sync call (>= 0).")]
Jobs = Annotated[int | None, typer.Option("--jobs", "-j", help="Parallel parsers.")]
