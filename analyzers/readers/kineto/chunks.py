"""The ``traceEvents`` array of a Chrome-trace JSON file, fed in blocks, as typed batches of
events, in linear time and bounded memory whatever the bytes are (``kineto.stream`` reads
the file and the fields around the array).

Fast path: the event array is cut between two top-level events (``}`` ``,`` ``{`` ``"`` with
only whitespace between) and each piece, up to the last cut in the bytes read so far, is
decoded as one JSON array (``decode_events``). A wrong cut (inside a string, or between two
objects nested in an event) leaves a piece that does not decode, so nothing wrong is taken.

Exact path: a piece that does not decode (a bad token, bad UTF-8, a cut in the wrong place),
and bytes with no cut for ``SLOW_AFTER`` bytes, are scanned exactly (``kineto.scan``): each item
of the array is found by its brackets and decoded alone, so one bad event costs that event
(skipped and counted with a reason) and nothing else. The scan resumes where it stopped when
more bytes arrive, so no byte is scanned twice. An event that never closes (a lost bracket)
is cut where the next Kineto event (``{"ph":``) begins; one larger than ``MAX_EVENT`` is
skipped without its bytes being held. The exact path hands back to the fast one as soon as it
is between two items again.

Memory: one block plus the pending piece, plus what the caller keeps per event.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from profplug.analyzers.readers.blocks import BLOCK
from profplug.analyzers.readers.kineto.decode import (
    DECODE_ERRORS,
    EPOCH_FRACTION,
    INVALID_JSON,
    TOO_BIG,
    Event,
    decode_events,
    decode_item,
)
from profplug.analyzers.readers.kineto.scan import OPEN, QUOTE, Scan, scalar_end, skip_between

MAX_EVENT = 64 << 20  # an event longer than this is skipped, its bytes dropped as they come
SLOW_AFTER = 4 * BLOCK  # this many bytes without a cut: scan exactly
EXACT_SNIFF = 1 << 20  # bytes searched for an epoch-us ts with decimals before the first event
RESYNC_AFTER = 1 << 20  # an unclosed event this long with a cut inside it is broken there
BOUNDARY = re.compile(rb'\}\s*,\s*(\{)\s*"')  # a '"' right after '{' is never in a string
EVENT_START = re.compile(rb'\}\s*,\s*(\{)\s*"ph"\s*:')  # Kineto writes "ph" first
_CLOSE_ARRAY = b"]"[0]


def _last_boundary(buf: bytearray, start: int) -> tuple[int, int]:
    """(the '}' ending the last event at or after ``start``, the '{' of the next), or
    (-1, -1). Searched backwards in growing windows: a block holds thousands of cuts."""
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


_NEXT = re.compile(rb"[\s,]*")
_EVENT_KEY = re.compile(rb'"(?:ph|cat|name|pid|tid|ts|dur|args|id|bp|s)"\s*:')
LOOK_AHEAD = 1 << 20  # bytes searched for more events after a ']' that may end the array


def _compact(buf: bytearray, start: int) -> None:
    """``buf[start:]`` holds only separators (whitespace, commas): keep one comma, if any."""
    sep = b"," if 0x2C in buf[start:] else b""
    del buf[start:]
    buf += sep


def _really_ends(buf: bytearray, pos: int, end: int, final: bool) -> bool | None:
    """Whether the ']' at ``pos`` closes the event array. It does when the object's '}',
    or ', "field"' with no event after it, follows; not when an item, an event's field or
    more events follow (then it is a stray byte). None: undecided until more is read; the
    separators read so far after it are then compacted (a run of spaces is never held)."""
    j = _NEXT.match(buf, pos + 1, end).end()  # type: ignore[union-attr]  # matches "": never None
    if j >= end:
        if final:
            return True
        _compact(buf, pos + 1)
        return None
    if buf[j] == 0x7D:  # '}': the end of the top-level object, if nothing follows it
        k = _NEXT.match(buf, j + 1, end).end()  # type: ignore[union-attr]  # matches "": never None
        if k >= end:
            if final:
                return True
            _compact(buf, j + 1)
            return None
        return False  # '}, ...': the '}' closed an event, the ']' was stray
    if 0x2C not in buf[pos + 1:j] or buf[j] != QUOTE:  # an item or junk follows
        return False
    if _EVENT_KEY.match(buf, j, end):  # an event's own field: a ']' inside an event
        return False
    if EVENT_START.search(buf, j, min(end, j + LOOK_AHEAD)):  # more events follow
        return False
    return True if final or end - j >= LOOK_AHEAD else None


class EventArray:
    """The items of the traceEvents array, fed in blocks; decoded events go to ``out``."""

    def __init__(self, skip: Callable[[str], None]) -> None:
        self.buf = bytearray(b"[")  # buf[0]: a '[' so a piece decodes in place as an array
        self.skip = skip
        self.out: list[list[Event]] = []
        self.n_events = 0
        self.closed = False  # the array's ']' was reached
        self.rest = b""  # bytes after that ']'
        self.searched = 1  # fast path: cuts searched for up to here
        self.slow = False
        self.pos = 1  # exact path: scanned up to here
        self.item = -1  # exact path: start of the open item (-1: between items)
        self.scan = Scan()
        self.scalar = False  # the open item is a scalar
        self.dropping = False  # the open item passed MAX_EVENT: its bytes are dropped
        self.next_cut = -1  # the next EVENT_START match: its '}' (-1: none known) ...
        self.next_start = -1  # ... and its '{'
        self.start_searched = 1  # EVENT_START searched for up to here
        self.resynced_to = -1  # generic cut search inside the open item done up to here
        self.slow_until = 1  # the exact path hands back once between items past this
        self.after_bad = False  # the last item was skipped
        self.quiet = False  # the open item is a fragment of that one: not counted
        self.exact = False  # ts decoded exactly (epoch us with ns decimals: kineto_decode)
        # the exact scan waits at a ']' that may close the array until more is read: the fast
        # path must not take over meanwhile (it would cut the objects after the array)
        self.at_close = False

    # ------------------------------------------------------------------ driving
    def feed(self, data: bytes | memoryview, final: bool = False) -> list[list[Event]]:
        self.buf += data
        if not self.n_events and not self.exact:  # older torch: epoch us with ns decimals,
            # beyond float64 (0.25 us apart at 1.76e15): decoded exactly (slower)
            self.exact = EPOCH_FRACTION.search(self.buf, 0, EXACT_SNIFF) is not None
        while not self.closed:
            if not self.slow:
                if self._fast():
                    continue
                if not final and len(self.buf) <= SLOW_AFTER:
                    break
                self._enter_slow()
            self._slow(final)
            if self.slow or final:
                break
        out, self.out = self.out, []
        return out

    def _emit(self, events: list[Event]) -> None:
        if events:
            self.out.append(events)
            self.n_events += len(events)

    def _enter_slow(self, until: int = 1) -> None:
        """Scan exactly from the buffer's start; hand back to the fast path once between
        items at or after ``until`` (the end of the piece that failed), after one item."""
        self.slow, self.pos, self.item, self.scan = True, 1, -1, Scan()
        self.next_cut, self.next_start, self.start_searched = -1, -1, 1
        self.slow_until = until

    # ------------------------------------------------------------------ fast path
    def _fast(self) -> bool:
        """Decode up to the last cut; True if the buffer changed (or the exact path must run)."""
        buf = self.buf
        k = buf.rfind(b"}", 1, self.searched) if self.searched > 1 else -1
        cut, nxt = _last_boundary(buf, max(k, 1))
        self.searched = len(buf)
        if cut < 0:
            return False
        saved = buf[cut + 1]
        buf[cut + 1] = 0x5D  # ']' after the last whole event: a JSON array, no copy
        try:
            with memoryview(buf) as whole, whole[:cut + 2] as piece:
                events = decode_events(piece, self.exact)
        except DECODE_ERRORS:
            buf[cut + 1] = saved
            self._enter_slow(cut + 1)
            return True
        buf[cut + 1] = saved
        self._emit(events)
        self.after_bad = False
        del buf[1:nxt]  # keep '[', drop what was decoded (cheap at the front)
        self.searched = len(buf)
        return True

    # ------------------------------------------------------------------ exact path
    def _slow(self, final: bool) -> None:
        """Scan the buffer exactly from ``pos``, item by item, until its bytes end, the array
        closes, or the scan is between items past the piece that failed (the fast path's)."""
        end, pos = len(self.buf), self.pos
        batch: list[Event] = []
        self.at_close = False
        while True:
            if self.item < 0:
                pos = self._open_item(pos, end, final)
                if self.item < 0:
                    break
            pos, more = self._scan_item(batch, pos, end, final)
            if not more:
                break
        self._emit(batch)
        self._drop_scanned(pos, final)

    def _open_item(self, pos: int, end: int, final: bool) -> int:
        """Between items: open the next one at or after ``pos`` (``item`` >= 0) and return
        where its scan starts; else (``item`` stays -1) where the scan stops: the bytes end,
        it is past the failed piece, or at a ']' that closes the array (``closed``) or may
        (undecided until more is read)."""
        buf = self.buf
        pos = skip_between(buf, pos, end)
        if pos >= end:
            return pos
        if pos >= self.slow_until and pos > 1 and not final and buf[pos] != _CLOSE_ARRAY:
            return pos  # past the piece that failed: back to the fast path
        c = buf[pos]
        if c == _CLOSE_ARRAY:
            ends = _really_ends(buf, pos, end, final)
            if ends is None:  # what follows is not read yet: decided with more bytes
                self.at_close = True
                return pos
            if ends:
                self.closed, self.rest = True, bytes(buf[pos + 1:])
                return end
            # a stray ']' with events after it: skipped like any junk between items
        self.item, self.dropping, self.resynced_to = pos, False, pos
        # the rest of a bad event (a bracket closed it early) is not counted again
        self.quiet = self.after_bad and c != OPEN
        self.scalar = c != OPEN and c != 0x5B and c != QUOTE
        self.scan = Scan(0, c == QUOTE)
        return pos + 1 if c == QUOTE else pos

    def _scan_item(self, batch: list[Event], pos: int, end: int, final: bool
                   ) -> tuple[int, bool]:
        """Scan the open item on from ``pos``; (where the scan is, whether to go on with the
        next item). A closed item is decoded into ``batch``; one a new event begins inside,
        or long with a cut inside, is broken there; one still open waits for more bytes."""
        if self.scalar:
            e = scalar_end(self.buf, pos, end)
            pos, closed = e, e < end or final
        else:
            stop = self._event_start(pos, end)
            pos, closed = self.scan.run(self.buf, pos, stop)
            if not closed and stop < end:  # a new event begins inside this one
                self._broken()
                return self.next_start, True
        if closed:
            return self._item_closed(batch, pos, end, final)
        if not self.scalar and self._resync(pos):  # long, unclosed, a cut inside
            self._broken()
            return self.resynced_to, True
        if pos - self.item > MAX_EVENT:
            self.dropping = True
        return pos, False

    def _item_closed(self, batch: list[Event], pos: int, end: int, final: bool
                     ) -> tuple[int, bool]:
        """The open item's brackets closed at ``pos``: as :meth:`_scan_item`. An event whose
        last ']' may be the array's (it lost its '}') ends the array when that ']' does."""
        buf = self.buf
        if not self.scalar and buf[self.item] == OPEN and buf[pos - 1] == _CLOSE_ARRAY:
            ends = _really_ends(buf, pos - 1, end, final)
            if ends is None:  # undecided: scan this ']' again with more bytes
                self.scan.depth = 1
                return pos - 1, False
            if ends:
                self._broken()
                self.closed, self.rest = True, bytes(buf[pos:])
                return end, False
        self._close(batch, pos)
        return pos, True

    def _drop_scanned(self, pos: int, final: bool) -> None:
        """Drop the bytes scanned before ``pos`` (those of an open item too once it passed
        MAX_EVENT: its scan state is kept), the positions shifted with them; hand back to the
        fast path when between items."""
        buf = self.buf
        keep = pos if self.item < 0 or self.dropping else self.item
        if self.item >= 0 and self.dropping:
            self.item = pos
        shift = keep - 1
        if shift > 0:
            del buf[1:keep]
            pos -= shift
            if self.item >= 0:
                self.item -= shift
            self.resynced_to = max(self.resynced_to - shift, 1)
            self.next_cut -= shift
            self.next_start -= shift
            self.start_searched = max(self.start_searched - shift, 1)
            self.slow_until = max(self.slow_until - shift, 1)
        self.pos = pos
        if self.item < 0 and not final and not self.closed and not self.at_close:
            self.slow = False  # between items again: back to the fast path
            self.searched = 1

    def _event_start(self, pos: int, end: int) -> int:
        """Where the open item must have closed at the latest: just after the '}' before the
        next ``{"ph":`` (each byte searched once), else ``end``."""
        if self.next_cut < pos:
            m = EVENT_START.search(self.buf, max(pos, self.start_searched), end)
            if m is None:
                self.start_searched = max(end - 64, pos)  # a match may straddle the end
                return end
            self.next_cut, self.next_start = m.start(), m.start(1)
            self.start_searched = m.start(1)
        return min(self.next_cut + 1, end)

    def _close(self, batch: list[Event], pos: int) -> None:
        if self.dropping:
            self.skip(TOO_BIG)
            self.after_bad = False
        else:
            with memoryview(self.buf) as whole, whole[self.item:pos] as text:
                ev, why = decode_item(text, self.exact)
            if ev is not None:
                batch.append(ev)
            elif not self.quiet:
                self.skip(why or INVALID_JSON)
            self.after_bad = ev is None
        self.item = -1
        self.dropping = False

    def _broken(self) -> None:
        """The open item never closed before a new event began: skipped as invalid JSON."""
        if not self.quiet:
            self.skip(INVALID_JSON)
        self.after_bad = True
        self.item = -1
        self.dropping = False

    def _resync(self, pos: int) -> bool:
        """An open item longer than RESYNC_AFTER: if a cut lies inside it, it is broken there
        (``resynced_to`` = the next item's start). Each byte is searched once."""
        if self.dropping or pos - self.item <= RESYNC_AFTER:
            return False
        m = BOUNDARY.search(self.buf, max(self.resynced_to, self.item + 1), pos)
        if m is None:
            self.resynced_to = max(pos - 64, self.item + 1)
            return False
        self.resynced_to = m.start(1)
        return True

    def finish(self) -> tuple[list[list[Event]], bool]:
        """Whatever is left at the end of the file; (batches, the array was cut short)."""
        out = self.feed(b"", final=True)
        return out, not self.closed
