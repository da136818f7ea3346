"""Where a command's text goes: stdout, or a file (a one-line error if it cannot be written)."""

from __future__ import annotations

import sys
from pathlib import Path

from profplug.errors import ProfplugError


def write_text(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output``, or to stdout when ``output`` is None."""
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        raise ProfplugError(f"{output}: cannot write ({exc.strerror or exc})") from None
