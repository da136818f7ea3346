"""Trace strings made safe for a terminal.

A kernel, NVTX range or file name can hold control characters: a newline breaks the table,
``ESC ]8;;url BEL`` makes a terminal link, ``ESC [31m`` recolours the screen, and
bidirectional overrides (U+202E...) reorder what is shown. Each becomes a visible escape
(``\\x1b``, ``\\u202e``; see ``profplug.analyzers.core.errors.one_line``); everything else is kept.
"""

from __future__ import annotations

import re
import textwrap
from types import MappingProxyType
from typing import TextIO

from profplug.analyzers.core.errors import CONTROL_ESCAPES

_KEEP_NEWLINES = MappingProxyType({c: v for c, v in CONTROL_ESCAPES.items() if c != 0x0A})


class PrintableWriter:
    """A text stream that escapes control characters, except newlines, on the way out."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, s: str) -> int:
        return self.out.write(s.translate(_KEEP_NEWLINES))


_LONG_WORD = 256  # a text with a longer word is wrapped by _greedy


def wrap(text: str, width: int, initial_indent: str = "", subsequent_indent: str = ""
         ) -> list[str]:
    """``textwrap.wrap``, in time linear in ``text``: textwrap breaks a long word by slicing
    what is left of it once per line (quadratic in a long word's length), so a text
    with a word longer than ``_LONG_WORD`` is wrapped greedily here instead (long words
    broken at the line's end, as textwrap does; runs of spaces become one)."""
    if len(text) <= _LONG_WORD or not re.search(rf"\S{{{_LONG_WORD + 1}}}", text):
        return textwrap.wrap(text, width, initial_indent=initial_indent,
                             subsequent_indent=subsequent_indent)
    out: list[str] = []
    parts: list[str] = [initial_indent]
    used, empty = len(initial_indent), True
    for word in text.split():
        pos = 0
        while pos < len(word):
            sep = 0 if empty else 1
            room = width - used - sep
            rest = len(word) - pos
            if rest <= room:
                parts += [" "] * sep + [word[pos:]]
                used, empty, pos = used + sep + rest, False, len(word)
            elif empty or rest > width - len(subsequent_indent):  # break the word here
                take = max(room, 1)
                parts += [" "] * sep + [word[pos:pos + take]]
                pos += take
                out.append("".join(parts))
                parts, used, empty = [subsequent_indent], len(subsequent_indent), True
            else:  # the word fits on a line of its own
                out.append("".join(parts))
                parts, used, empty = [subsequent_indent], len(subsequent_indent), True
    if not empty:
        out.append("".join(parts))
    return out
