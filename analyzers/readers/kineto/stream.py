"""Read a Kineto trace file as a stream: the fields around ``traceEvents`` (the header), and
its events as typed batches (``chunks.EventArray``), whatever the bytes are.

The fields before the array (at most ``MAX_HEAD`` bytes; leading whitespace is not kept) and
after it are decoded as objects; one that fails to decode costs only itself, and unknown
fields are never decoded. "traceEvents" is found where the exact scan says it is a key of
the top-level object, not inside a string or a nested value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.blocks import Blocks
from profplug.analyzers.readers.kineto.chunks import EventArray
from profplug.analyzers.readers.kineto.decode import Event, Header, _decode_any
from profplug.analyzers.readers.kineto.scan import Scan, member_dict

MAX_HEAD = 64 << 20  # bytes of fields before (or after) the event array
TRACE_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')
HEADER_KEYS = frozenset(Header.__struct_fields__)
_WS = b" \t\r\n"
_LEADING_WS = re.compile(rb"[ \t\r\n]*")
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, allowed before the object
OPEN_BRACE = 0x7B
HEAD_STEP = 64 << 10  # bytes of a block taken into the head at a time


def _after_ws(view: memoryview, pos: int) -> int:
    """The position of the first byte at or after ``pos`` that is not JSON whitespace."""
    m = _LEADING_WS.match(view, pos)
    return m.end() if m else pos


class EventStream:
    """Iterate a Kineto trace's events in typed batches; ``fields`` (the header),
    ``warnings`` and ``skipped`` (reason -> count) are complete once iteration ends."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.blocks = Blocks(path, limit)
        self.fields: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.skipped: dict[str, int] = {}
        self.n_events = 0

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def __iter__(self) -> Iterator[list[Event]]:
        blocks = iter(self.blocks)
        head, first = self._head(blocks)
        self._decode_fields(head + b"}", "before traceEvents")
        arr = EventArray(self.skip)
        for part in first:
            yield from arr.feed(part)
        del first  # copied into the array's buffer
        for block in blocks:
            if arr.closed:
                break
            yield from arr.feed(block)
            if arr.closed:
                break
        out, cut = arr.finish()
        yield from out
        self.n_events = arr.n_events
        if cut:
            if arr.n_events == 0 and not self.skipped:
                raise TraceError(f"{self.path}: truncated before the first complete event")
            self.warnings.append(f"truncated at byte {self.blocks.total}; "
                                 f"{arr.n_events} events recovered")
        else:
            self._tail(arr.rest, blocks)
        if self.blocks.note:
            self.warnings.insert(0, self.blocks.note)

    def _head(self, blocks: Iterator[bytes | memoryview]
              ) -> tuple[bytes, list[bytes | memoryview]]:
        """(the object text before "traceEvents", without its last ','; what follows the
        array's '[' in the block where it was found, in parts). Leading whitespace is not
        kept; the rest is capped at MAX_HEAD. A block is taken into the head ``HEAD_STEP``
        bytes at a time: the '[' is usually in its first kilobytes, and the events after it
        are handed on as a view of the block, not copied here."""
        head = bytearray()
        scan = Scan(1)  # inside the top-level object
        scanned = 1  # head[:scanned] is scanned; scan holds the state there
        for block in blocks:
            view = memoryview(block)
            if not head:  # leading whitespace, a byte order mark
                start = _after_ws(view, 0)
                if view[start:start + 3] == BOM:
                    start = _after_ws(view, start + 3)
                if start == len(view):
                    continue
                if view[start] != OPEN_BRACE:
                    raise TraceError(f"{self.path}: not a Kineto trace (not a JSON object)")
                view = view[start:]
            for off in range(0, len(view), HEAD_STEP):
                head += view[off:off + HEAD_STEP]
                while (m := TRACE_EVENTS.search(head, scanned)) is not None:
                    scanned, closed = scan.run(head, scanned, m.start())
                    if closed:
                        self._no_events(head)
                    if scanned == m.start() and scan.depth == 1 and not scan.in_str:
                        text = bytes(head[:m.start()]).rstrip(_WS).rstrip(b",")
                        return text, [bytes(head[m.end():]), view[off + HEAD_STEP:]]
                    scanned, closed = scan.run(head, scanned, m.end())  # in a string/value
                    if closed:
                        self._no_events(head)
                # keep a margin: a match may straddle the end of what was read
                scanned, closed = scan.run(head, scanned, max(scanned, len(head) - 64))
                if closed:
                    self._no_events(head)
                if len(head) > MAX_HEAD:
                    raise TraceError(f"{self.path}: not a Kineto trace (no traceEvents array "
                                     f"in the first {MAX_HEAD >> 20} MiB)")
        if not head:
            raise TraceError(f"{self.path}: not a Kineto trace (only whitespace)")
        self._no_events(head)
        raise AssertionError  # pragma: no cover - _no_events raises

    def _no_events(self, head: bytearray) -> None:
        if b'"nodes"' in head and b'"schema"' in head:
            raise TraceError(f"{self.path}: a PyTorch execution trace (schema/nodes), not a "
                             "Kineto trace (profplug reads torch.profiler's Chrome trace)")
        raise TraceError(f"{self.path}: not a Kineto trace (no traceEvents)")

    def _tail(self, rest: bytes, blocks: Iterator[bytes | memoryview]) -> None:
        tail = bytearray(rest.lstrip(_WS))
        for block in blocks:
            if not bytes(block).strip(_WS):
                continue
            tail += block
            if len(tail) > MAX_HEAD:
                self.warnings.append(f"more than {MAX_HEAD >> 20} MiB after traceEvents: "
                                     "the fields there were not read")
                return
        text = bytes(tail).strip(_WS)
        if not text.endswith(b"}"):
            self.warnings.append(f"truncated at byte {self.blocks.total} (after the events)")
        self._decode_fields(b"{" + text.lstrip(b",").lstrip(_WS), "after traceEvents")

    def _decode_fields(self, text: bytes, where: str) -> None:
        try:
            d = _decode_any(text)
            fields = {k: v for k, v in d.items() if k in HEADER_KEYS} \
                if isinstance(d, dict) else {}
            bad: list[str] = []
        except (ValueError, RecursionError):
            fields, bad = member_dict(text, _decode_any, HEADER_KEYS)
        self.fields.update(fields)
        if bad:
            self.warnings.append(f"unreadable field(s) {', '.join(bad)} {where}: ignored")
