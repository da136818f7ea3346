"""Carriage-return progress bars (nsys's "Processing N events: [==  ] 40%") kept out of logs.

A terminal redraws such a bar in place; a log file or pipe keeps every redraw. When
``profplug run`` writes to something other than a terminal, the child's output passes through
``Quieted``: of each line, only what a terminal would finally show (the text after its last
``\\r``) is kept, so a bar leaves its last state, once. Output without ``\\r`` is unchanged
(bytes as written). Stdlib only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import IO, Any

HOLD_LIMIT = 1 << 16  # a partial line longer than this is written out as it is


class CarriageFilter:
    """Feed bytes, get back the bytes to write: whole lines, each reduced to its last
    ``\\r``-separated state (a ``\\r`` right before the newline is kept as it is)."""

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        buf = self._held + data
        end = buf.rfind(b"\n") + 1
        done, self._held = buf[:end], buf[end:]
        body = self._held.removesuffix(b"\r")  # that one may be a CRLF's
        if b"\r" in body:  # a redraw in progress: only its latest state can show
            self._held = self._held[body.rfind(b"\r") + 1:]
        lines = done.split(b"\n")[:-1]  # not splitlines(): that splits at \r too
        shown = b"".join(_last_state(line) + b"\n" for line in lines)
        if len(self._held) > HOLD_LIMIT:
            shown, self._held = shown + self._held, b""
        return shown

    def close(self) -> bytes:
        held, self._held = self._held, b""
        return held


def _last_state(line: bytes) -> bytes:
    """A line (without its newline) as a terminal leaves it: after its last ``\r``."""
    body = line.removesuffix(b"\r")
    if b"\r" not in body:
        return line
    return body[body.rfind(b"\r") + 1:] + line[len(body):]


def _pump(source: IO[bytes], fd: int) -> None:
    f = CarriageFilter()
    try:
        while chunk := source.read1(1 << 16):  # type: ignore[attr-defined]  # a pipe: BufferedReader
            _write(fd, f.feed(chunk))
        _write(fd, f.close())
    finally:
        source.close()


def _write(fd: int, data: bytes) -> None:
    while data:
        try:
            n = os.write(fd, data)
        except OSError:  # our own output is gone: drop the child's, never block it
            return
        data = data[n:]


def quiet_streams() -> tuple[bool, bool]:
    """Whether to filter the child's stdout and stderr: each one not a terminal."""
    return not _isatty(1), not _isatty(2)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


class Quieted:
    """``subprocess.Popen`` whose stdout/stderr (as chosen) pass through CarriageFilter to
    this process's fd 1/2. Call ``join()`` after the child has exited."""

    def __init__(self, cmd: list[str], *, filter_out: bool, filter_err: bool,
                 **kw: Any) -> None:
        pipe = subprocess.PIPE
        for stream in (sys.stdout, sys.stderr):  # ours first, then the child's
            stream.flush()
        self.proc = subprocess.Popen(cmd, stdout=pipe if filter_out else None,
                                     stderr=pipe if filter_err else None, **kw)
        self._threads = [threading.Thread(target=_pump, args=(s, fd), daemon=True)
                         for s, fd in ((self.proc.stdout, 1), (self.proc.stderr, 2))
                         if s is not None]
        for t in self._threads:
            t.start()

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the output to drain (a grandchild holding the pipe open: not forever)."""
        for t in self._threads:
            t.join(timeout)


def run_quieted(cmd: list[str], **kw: Any) -> int:
    """``subprocess.run(cmd)`` with progress bars filtered where not writing to a terminal."""
    out, err = quiet_streams()
    q = Quieted(cmd, filter_out=out, filter_err=err, **kw)
    rc = q.proc.wait()
    q.join()
    return rc
