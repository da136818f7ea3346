"""Stream a Chrome-trace JSON file as chunks of its ``traceEvents`` array, in bounded memory.

A 500 MB trace is never held whole: the file (or its gzip stream) is read in blocks, and the
event array is cut between two top-level events (``}`` ``,`` ``{`` ``"`` with only whitespace
between; inside a JSON string that ``"`` would be escaped), each piece handed on as a JSON
array. A cut in the wrong place (between two objects nested in an event's args) leaves an
unbalanced piece, so the caller's decode of it fails and the caller
falls back to reading the whole file; nothing wrong is ever decoded silently.

Fields around the array (``distributedInfo``, ``baseTimeNanoseconds``, ``traceName``...) come
back at the end as one JSON object text: Kineto writes most before the array, some after.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import msgspec

BLOCK = 2 << 20  # bytes read at a time: small enough to stay in cache (16 MB was 30% slower)
GZ_BLOCK = 256 << 10  # compressed bytes inflated at a time (JSON inflates ~10-20x)
BOUNDARY = re.compile(rb'\}\s*,\s*(\{)\s*"')  # a '"' after '{' is never inside a string
KEY = b'"traceEvents"'
_ANY = msgspec.json.Decoder()


class NotStreamable(Exception):
    """The file is not laid out as expected; read it whole instead."""


def _blocks(path: Path) -> Iterator[bytes | memoryview]:
    """Uncompressed blocks of the file (gzip inflated on the fly); a block is valid until
    the next one is asked for (plain files reuse one buffer)."""
    with open(path, "rb") as fh:
        first = fh.read(BLOCK)
        if first[:2] != b"\x1f\x8b":
            yield first
            block = bytearray(BLOCK)
            with memoryview(block) as view:
                while n := fh.readinto(view):
                    yield view[:n]
            return
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        raw = first[:GZ_BLOCK]
        pending = first[GZ_BLOCK:]
        while raw:
            try:
                out = d.decompress(raw)
            except zlib.error as exc:
                raise NotStreamable(str(exc)) from None
            if out:
                yield out
            if d.eof:
                if d.unused_data.strip(b"\0") or pending or fh.read(1):
                    raise NotStreamable("more than one gzip member")
                return
            raw, pending = (pending[:GZ_BLOCK], pending[GZ_BLOCK:]) if pending \
                else (fh.read(GZ_BLOCK), b"")
        raise NotStreamable("gzip stream cut short")


def _last_boundary(buf: bytes | bytearray, start: int) -> tuple[int, int]:
    """(offset of the '}' ending the last event at or after ``start``, offset of the '{'
    starting the next), or (-1, -1)."""
    window = 1 << 16
    lo = len(buf)
    while lo > start:
        lo = max(start, lo - window)
        last = None
        for last in BOUNDARY.finditer(buf, lo):  # noqa: B007 - the last match is wanted
            pass
        if last is not None:
            return last.start(), last.start(1)
        window *= 4
    return -1, -1


def event_chunks(path: Path) -> Iterator[bytes | memoryview | tuple[bytes, bytes]]:
    """Yield JSON arrays of events, then one ``(head, tail)`` pair.

    An array is bytes or a memoryview valid until the next item is asked for (decode it
    first). ``head`` is the object text before the array with the array removed
    (``{...}``), ``tail`` the object text after it; both for a JSON object decoder.
    Raises NotStreamable when the layout is not the expected one.
    """
    blocks = _blocks(path)
    buf = b""
    for block in blocks:  # the head: up to the '[' of traceEvents
        buf += block
        key = buf.find(KEY)
        lb = buf.find(b"[", key) if key >= 0 else -1
        if lb >= 0:
            break
        if len(buf) > 4 * BLOCK:
            raise NotStreamable("no traceEvents near the start")
    else:
        raise NotStreamable("no traceEvents")
    if not buf.lstrip().startswith(b"{"):
        raise NotStreamable("not a JSON object")
    head = buf[:key].rstrip().rstrip(b",") + b"}"
    if head.lstrip() == b"{}":
        head = b"{}"
    arr = bytearray(buf[lb:])  # arr[0] is the array's '['; events follow
    del buf
    for block in blocks:
        arr += block
        cut, nxt = _last_boundary(arr, 1)
        if cut < 0:
            continue
        saved = arr[cut + 1]
        arr[cut + 1] = 0x5D  # ']' after the last whole event: a JSON array, no copy
        with memoryview(arr) as whole:
            piece = whole[:cut + 2]
            yield piece
            piece.release()
        arr[cut + 1] = saved
        del arr[1:nxt]  # keep '[', drop what was handed out (cheap at the front)
    buf = bytes(arr[1:])
    del arr
    cut, nxt = _last_boundary(buf, 0)
    if cut >= 0:
        yield b"[" + buf[:cut + 1] + b"]"
        buf = buf[nxt:]
    # Left now: the last event, ']', then the trailing fields and '}'. The array's ']' is
    # the first one before which the text is a complete list of events.
    rb = -1
    for _ in range(1000):
        rb = buf.find(b"]", rb + 1)
        if rb < 0:
            break
        body = b"[" + buf[:rb].strip() + b"]"
        try:
            _ANY.decode(body)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        rest = buf[rb + 1:].strip()
        if not (rest.endswith(b"}") and (rest == b"}" or rest.startswith(b","))):
            break
        if body != b"[]":
            yield body
        yield head, b"{" + rest.lstrip(b",")
        return
    raise NotStreamable("cut short (no end of traceEvents)")
