"""One root error type: the CLI prints its message on one line and exits with its code."""

from __future__ import annotations

from types import MappingProxyType


class ProfplugError(Exception):
    """A user-facing error (bad path, bad trace, missing tool). Never shown as a traceback."""

    exit_code = 2


class TraceError(ProfplugError):
    """A trace file that cannot be read: the message names the file."""

    exit_code = 3


class ClocksApart(ProfplugError):
    """Ranks on clocks that nothing aligns (``readers.clocks``): no figure joins them across
    ranks. A report that has one says so instead of its mixed-sources warning."""


class ToolMissingError(ProfplugError):
    """An external tool (nsys, torchrun) is not installed or not found."""

    exit_code = 4


# Control characters (C0, DEL, C1, bidirectional overrides) from trace or file names: shown
# escaped, so a message stays one line and a terminal runs no escape sequence.
CONTROL_ESCAPES = MappingProxyType({
    **{c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
       for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F,
                 *range(0x202A, 0x202F), *range(0x2066, 0x206A))},
    0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})


def one_line(message: object) -> str:
    """``message`` with newlines and every other control character escaped."""
    return str(message).translate(CONTROL_ESCAPES)
