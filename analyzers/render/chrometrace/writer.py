"""The Chrome Trace Event Format, written as a stream: one event a line, never the whole list
in memory.

The file is the format's JSON Object form: ``{"otherData": {...}, "displayTimeUnit": "ns",
"traceEvents": [...]}``, the metadata first (a reader that stops at the event array, or a
person reading the file's head, sees it). Every slice is a complete event (``ph`` ``X``: no B/E pair to
balance), ``ts``/``dur`` in us with 3 decimals (ns), relative to the run's origin so that the
doubles a viewer reads keep every ns (written from int64 ns as integers: no float on the
way). Processes and threads are named by metadata events
(``process_name``, ``thread_name``, ``*_sort_index``); flows are ``s``/``f`` pairs with one id
(the ``f`` bound to its enclosing slice, ``bp`` ``e``). Columns go in as numpy arrays and come
out in chunks of :data:`CHUNK` events, formatted by one comprehension each.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

CHUNK = 16_384  # events formatted and written at a time (a few MB: memory reused, not mapped anew)


def enc(s: str) -> str:
    """A JSON string literal."""
    return json.dumps(s)


class TraceWriter:
    """Writes the events of one trace file to ``out`` (a text stream)."""

    def __init__(self, out: TextIO) -> None:
        self.out = _Sink(out)
        self.n_events = 0
        self._next_flow = 1

    def begin(self, other: dict[str, Any]) -> None:
        """Start the file; ``other``: its ``otherData`` (profplug's metadata)."""
        self.out.write('{"otherData":' + json.dumps(other, indent=1)
                       + ',\n"displayTimeUnit":"ns",\n"traceEvents":[\n')

    def _lines(self, lines: list[str]) -> None:
        if not lines:
            return
        if self.n_events:  # the separator on the first line, not on a copy of the chunk
            lines[0] = ",\n" + lines[0]
        self.out.write(",\n".join(lines))
        self.n_events += len(lines)

    def process(self, pid: int, name: str, sort: int) -> None:
        self._lines([f'{{"ph":"M","pid":{pid},"tid":0,"name":"process_name",'
                     f'"args":{{"name":{enc(name)}}}}}',
                     f'{{"ph":"M","pid":{pid},"tid":0,"name":"process_sort_index",'
                     f'"args":{{"sort_index":{sort}}}}}'])

    def thread(self, pid: int, tid: int, name: str, sort: int) -> None:
        self._lines([f'{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name",'
                     f'"args":{{"name":{enc(name)}}}}}',
                     f'{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_sort_index",'
                     f'"args":{{"sort_index":{sort}}}}}'])

    def slices(self, pid: int, tid: int, cat: str, start_ns: np.ndarray, dur_ns: np.ndarray,
               names: Sequence[str], args: Sequence[str] | None = None,
               cname: str | None = None, ints: tuple[str, np.ndarray] | None = None) -> None:
        """Complete events on one thread: ``names`` JSON string literals (one per event),
        times in int64 ns on the run's axis (written as us with 3 decimals); ``args``: a
        JSON object per event, or ``ints``: (its head, e.g. ``{"correlation":``, one integer
        per event), the object closed after the integer."""
        head = f'{{"ph":"X","pid":{pid},"tid":{tid},"cat":{enc(cat)},'
        if cname is not None:
            head += f'"cname":{enc(cname)},'
        n = len(names)
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            ts, ds = start_ns[lo:hi], dur_ns[lo:hi]
            mag = np.abs(ts)
            tq: list[Any] = (mag // 1000).tolist()
            for i in np.nonzero(ts < 0)[0].tolist():  # before the run's origin: signed
                tq[i] = f"-{tq[i]}"
            self._lines(_format(head + '"name":', names[lo:hi], tq, (mag % 1000).tolist(),
                                (ds // 1000).tolist(),
                                (ds % 1000).tolist(), None if args is None else args[lo:hi],
                                None if ints is None else (ints[0], ints[1][lo:hi].tolist())))

    def flows(self, name: str, cat: str, a: tuple[np.ndarray, np.ndarray, np.ndarray],
              b: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Arrows from (pid, tid, ts_us) ``a`` to ``b``, element by element; each start and
        end lies inside a slice of its thread."""
        n = int(a[0].size)
        first = self._next_flow
        self._next_flow += n
        head = f'"name":{enc(name)},"cat":{enc(cat)}'
        ids = range(first, first + n)
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            cols = [c[lo:hi].tolist() for c in (*a, *b)]
            self._lines([
                f'{{"ph":"s","id":{i},{head},"pid":{p0},"tid":{t0},"ts":{x0:.3f}}},\n'
                f'{{"ph":"f","bp":"e","id":{i},{head},"pid":{p1},"tid":{t1},"ts":{x1:.3f}}}'
                for i, p0, t0, x0, p1, t1, x1 in zip(ids[lo:hi], *cols, strict=True)])
            self.n_events += hi - lo  # two events a line

    def close(self, failed: bool = False) -> None:
        """End the event list and the file (``failed``: only stop the writing thread)."""
        if not failed:
            self.out.write("\n]}\n")
        self.out.close()


class _Sink:
    """Writes text to ``out`` on a thread of its own: the file's write, and gzip's
    compression, release the GIL, so they run beside the formatting of the next events. At
    most ``DEPTH`` chunks wait; an error in the writing is raised by the next write or by
    :meth:`close`."""

    DEPTH = 4

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.q: queue.Queue[str | None] = queue.Queue(maxsize=self.DEPTH)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="trace-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (text := self.q.get()) is not None:
            if self.error is None:
                try:
                    self.out.write(text)
                except BaseException as exc:
                    self.error = exc

    def write(self, text: str) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(text)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


# the three decimals of a us, by table: a lookup costs ~40% less CPU than a ``:03d`` format
_MS = tuple(f"{i:03d}" for i in range(1000))


def _format(pre: str, nm: Sequence[str], tq: list[Any], tr: list[int], dq: list[int],
            dr: list[int], args: Sequence[str] | None,
            ints: tuple[str, list[int]] | None) -> list[str]:
    """One line per event, by f-strings (CPython's fastest formatting): ``ts`` = ``tq``
    (whole us, a string with its sign when negative) . ``tr`` (the ns), ``dur`` likewise."""
    m = _MS
    if ints is not None:
        h = f',"args":{ints[0]}'
        return [f'{pre}{n},"ts":{a}.{m[b]},"dur":{c}.{m[d]}{h}{x}}}}}'
                for n, a, b, c, d, x in zip(nm, tq, tr, dq, dr, ints[1], strict=True)]
    if args is not None:
        return [f'{pre}{n},"ts":{a}.{m[b]},"dur":{c}.{m[d]},"args":{x}}}'
                for n, a, b, c, d, x in zip(nm, tq, tr, dq, dr, args, strict=True)]
    return [f'{pre}{n},"ts":{a}.{m[b]},"dur":{c}.{m[d]}}}'
            for n, a, b, c, d in zip(nm, tq, tr, dq, dr, strict=True)]


def us3(ns: np.ndarray) -> list[str]:
    """Whole, non-negative ns as us with 3 decimals (``idle_us``)."""
    m = _MS
    return [f"{q}.{m[r]}" for q, r in zip((ns // 1000).tolist(), (ns % 1000).tolist(),
                                           strict=True)]


def names_of(ids: np.ndarray, table: Sequence[str], fmt: str = "{}") -> list[str]:
    """Per id, the JSON literal of ``fmt`` applied to ``table[id]``; each name encoded once."""
    if ids.size == 0:
        return []
    uniq, inv = np.unique(ids, return_inverse=True)
    lit = np.array([enc(fmt.format(table[int(i)] if 0 <= i < len(table) else "?"))
                    for i in uniq.tolist()], dtype=object)
    literals: list[str] = lit[inv.reshape(-1)].tolist()
    return literals
