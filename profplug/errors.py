"""One root error type: the CLI prints its message on one line and exits with its code."""

from __future__ import annotations


class ProfplugError(Exception):
    """A user-facing error (bad path, bad trace, missing tool). Never shown as a traceback."""

    exit_code = 2


class TraceError(ProfplugError):
    """A trace file that cannot be read: the message names the file."""

    exit_code = 3


class ToolMissingError(ProfplugError):
    """An external tool (nsys, torchrun) is not installed or not found."""

    exit_code = 4
