"""The bytes of a trace file in blocks: plain, or gzip inflated on the fly within a budget.

Plain files are read into one reused buffer. Gzip is inflated at most ``BLOCK`` bytes per
step (``max_length``), so a block of zeros that would inflate a thousandfold never exists
whole; past ``limit`` inflated bytes the read stops with :func:`limits.too_big`. A stream
cut short or corrupt after some bytes inflated ends the blocks with a ``note`` (the events
before it are kept); one that inflates to nothing is a one-line error.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.limits import too_big

BLOCK = 2 << 20  # bytes handed on at a time: small enough to stay in cache
GZ_BLOCK = 256 << 10  # compressed bytes read at a time


def regular_file(path: Path) -> os.stat_result:
    """``path``'s stat; a TraceError for anything that is not a regular file (a FIFO would
    block the reader, a device never ends)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise TraceError(f"{path}: not a regular file ({kind_of(st.st_mode)})")
    return st


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


class Blocks:
    """Iterate ``path``'s uncompressed bytes; ``total`` counts them, ``note`` says why a gzip
    stream ended early (None when it did not)."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.total = 0
        self.note: str | None = None
        self.gz = False

    def __iter__(self) -> Iterator[bytes | memoryview]:
        """Blocks; a plain file's block is valid until the next one is asked for."""
        regular_file(self.path)
        try:
            with open(self.path, "rb") as fh:
                first = fh.read(BLOCK)
                if not first:
                    raise TraceError(f"{self.path}: empty file")
                if first[:2] == b"\x1f\x8b":
                    self.gz = True
                    yield from self._inflate(fh, first)
                    return
                self.total = len(first)
                yield first
                del first  # the caller is done with it: do not hold two blocks
                block = bytearray(BLOCK)
                with memoryview(block) as view:
                    while n := fh.readinto(view):
                        self.total += n
                        yield view[:n]
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read ({exc.strerror or exc})") from None

    def _inflate(self, fh: BinaryIO, first: bytes) -> Iterator[bytes]:
        d: Any = None  # the member being inflated; None between members
        pending = first
        consumed = 0  # compressed bytes handed to zlib
        while True:
            if not pending:
                pending = fh.read(GZ_BLOCK)
                if not pending:
                    break
            raw, pending = pending[:GZ_BLOCK], pending[GZ_BLOCK:]
            consumed += len(raw)
            while True:
                if d is None:  # between members: zero padding, or another member
                    raw = raw.lstrip(b"\0")
                    if not raw:
                        break
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                try:
                    out = d.decompress(raw, BLOCK)
                except zlib.error as exc:
                    self._stop(f"corrupt gzip ({exc})", str(exc), consumed)
                    return
                raw = d.unconsumed_tail
                if out:
                    self.total += len(out)
                    if self.total > self.limit:
                        raise too_big(self.path, self.limit)
                    yield out
                if d.eof:
                    raw, d = d.unused_data, None
                elif not raw and len(out) < BLOCK:
                    break
        if d is not None:
            self._stop("gzip stream cut short", "cut short", consumed)

    def _stop(self, note: str, detail: str, consumed: int) -> None:
        if self.total == 0:
            raise TraceError(f"{self.path}: corrupt or truncated gzip ({detail}; nothing could "
                             "be inflated)")
        self.note = f"{note} after {consumed} compressed bytes"
