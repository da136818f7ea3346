"""Exact, resumable JSON structure scanning: where an array item or an object member ends.

No value is built: a regex jumps over everything that is not a bracket or a string, and
strings are skipped whole (escapes included), so the cost is a few regex steps per nesting
level, not per byte. The state (nesting depth, inside a string or not) is kept between
calls, so a scan can stop at the end of the bytes read so far and resume when more arrive;
nothing is ever scanned twice.

Brackets are counted, not matched by kind: ``{"a": [}`` passes here and is rejected when the
item is decoded. A missing closing bracket keeps the depth up; readers bound that with
their own resynchronisation (see ``kineto.chunks``).
"""

from __future__ import annotations

import re
from typing import Any

_SKIP = re.compile(rb'[^"{}\[\]]*')  # inside a value, outside strings: up to a structural byte
_STR = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # a string's body, up to its closing quote
_BETWEEN = re.compile(rb"[\s,]*")  # between array items
_SCALAR = re.compile(rb'[^\s,\[\]{}":]+')  # a number, true/false/null, or junk
OPEN, CLOSE, QUOTE = b"{["[0], b"}]"[0], 0x22
_OPENERS = frozenset(b"{[")
_CLOSERS = frozenset(b"}]")

Buf = bytes | bytearray | memoryview


class Scan:
    """Scanning state inside one JSON value: ``depth`` brackets open, ``in_str``."""

    __slots__ = ("depth", "in_str")

    def __init__(self, depth: int = 0, in_str: bool = False) -> None:
        self.depth = depth
        self.in_str = in_str

    def run(self, buf: Buf, pos: int, end: int) -> tuple[int, bool]:
        """Scan ``buf[pos:end]``; returns (position reached, the value closed there).

        The value closes when its depth returns to 0 (a container's last bracket, or the
        closing quote of a top-level string). Otherwise the scan stops at ``end`` (or just
        before a backslash that ``end`` cut from its escaped byte) with the state kept.
        """
        skip, string = _SKIP.match, _STR.match
        depth, in_str = self.depth, self.in_str
        closed = False
        while pos < end:
            if in_str:
                pos = string(buf, pos, end).end()  # type: ignore[union-attr]  # matches "": never None
                if pos >= end or buf[pos] != QUOTE:  # cut short (maybe inside an escape)
                    break
                pos += 1
                in_str = False
                if depth == 0:
                    closed = True
                    break
                continue
            pos = skip(buf, pos, end).end()  # type: ignore[union-attr]  # matches "": never None
            if pos >= end:
                break
            c = buf[pos]
            pos += 1
            if c == QUOTE:
                in_str = True
            elif c in _OPENERS:
                depth += 1
            else:
                depth -= 1
                if depth <= 0:
                    depth = 0
                    closed = True
                    break
        self.depth, self.in_str = depth, in_str
        return pos, closed


def skip_between(buf: Buf, pos: int, end: int) -> int:
    """The position of the next array item (or of the array's ']') at or after ``pos``."""
    return _BETWEEN.match(buf, pos, end).end()  # type: ignore[union-attr]  # matches "": never None


def scalar_end(buf: Buf, pos: int, end: int) -> int:
    """End of a scalar (number, literal or junk) starting at ``pos``; at least ``pos + 1``."""
    m = _SCALAR.match(buf, pos, end)
    return max(m.end() if m else pos, pos + 1)


def object_members(text: Buf) -> list[tuple[bytes, bytes]] | None:
    """The (key, value) texts of a JSON object's top-level members, found exactly.

    Keys keep their quotes (``b'"rank"'``). None when ``text`` is not an object. Members
    whose shape is wrong (no colon, no value) are left out; values are not validated.
    """
    n = len(text)
    pos = skip_between(text, 0, n)
    if pos >= n or text[pos] != OPEN:
        return None
    pos += 1
    out: list[tuple[bytes, bytes]] = []
    while True:
        pos = skip_between(text, pos, n)
        if pos >= n or text[pos] == CLOSE:
            return out
        key_start = pos
        pos = _value_end(text, pos, n)
        key = bytes(text[key_start:pos])
        pos = skip_between(text, pos, n)
        if pos >= n or text[pos] != 0x3A:  # ':'
            pos = _resync_member(text, pos, n)
            continue
        pos = skip_between(text, pos + 1, n)
        if pos >= n:
            return out
        v_start = pos
        pos = _value_end(text, pos, n)
        if key.startswith(b'"'):
            out.append((key, bytes(text[v_start:pos])))


def _value_end(text: Buf, pos: int, n: int) -> int:
    c = text[pos]
    if c in _OPENERS or c == QUOTE:
        s = Scan(0, c == QUOTE)
        end, _ = s.run(text, pos + 1 if c == QUOTE else pos, n)
        return end
    if c in _CLOSERS:
        return pos + 1
    return scalar_end(text, pos, n)


def _resync_member(text: Buf, pos: int, n: int) -> int:
    """After a malformed member: the next ',' at this level (or the end)."""
    while pos < n and text[pos] != 0x2C:
        if text[pos] == CLOSE:
            return pos
        pos = _value_end(text, pos, n)
    return pos


def member_dict(text: Buf, decode: Any, keys: frozenset[str]) -> tuple[dict[str, Any], list[str]]:
    """Decode the members named in ``keys`` one by one; returns (fields, names that failed).

    For an object whose whole decode failed: one bad member (too deep, a bad token) costs
    only that member.
    """
    members = object_members(text) or []
    fields: dict[str, Any] = {}
    bad: list[str] = []
    for k, v in members:
        name = k[1:-1].decode("utf-8", errors="replace")
        if name not in keys:
            continue
        try:
            fields[name] = decode(v)
        except (ValueError, RecursionError):  # costs this member only
            bad.append(name)
    return fields, bad
