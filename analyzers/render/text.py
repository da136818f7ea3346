"""Trace strings made safe for a terminal.

A kernel, NVTX range or file name can hold control characters: a newline breaks the table,
``ESC ]8;;url BEL`` makes a terminal link, ``ESC [31m`` recolours the screen, and
bidirectional overrides (U+202E...) reorder what is shown. Each becomes a visible escape
(``\\x1b``, ``\\u202e``; see ``profplug.errors.one_line``); everything else is kept.
"""

from __future__ import annotations

from typing import TextIO

from ...errors import CONTROL_ESCAPES

_KEEP_NEWLINES = {c: v for c, v in CONTROL_ESCAPES.items() if c != 0x0A}


class PrintableWriter:
    """A text stream that escapes control characters, except newlines, on the way out."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, s: str) -> int:
        return self.out.write(s.translate(_KEEP_NEWLINES))
