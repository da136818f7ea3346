"""Integer columns of an Nsight export table as int64 arrays, in blocks, on several threads.

SQLite joins each column of a block of rows into one text (``group_concat``) and numpy
parses it: no Python object per row. Blocks of ``CHUNK_ROWS`` rowids bound the text held
at once. SQLite runs a query without holding the GIL, so blocks are read on ``workers``
threads, each with its own read-only connection; the blocks are put back in rowid order,
so the result is the same array whatever the number of workers.
"""

from __future__ import annotations

import sqlite3
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

I64 = np.int64
T = TypeVar("T")
CHUNK_ROWS = 1 << 20  # most rows per aggregate query
MIN_CHUNK_ROWS = 1 << 16  # fewest rows per query when a table is split for the threads
PARALLEL_MIN_ROWS = 2 * MIN_CHUNK_ROWS  # smaller tables are read on the calling thread
MAX_DEST_ROWS = 1 << 28  # rowid spans up to this are filled in place, not concatenated


def empty(n: int) -> list[np.ndarray]:
    return [np.zeros(0, dtype=I64) for _ in range(n)]


def _parse(text: str | bytes | None) -> np.ndarray:
    if not text:
        return np.zeros(0, dtype=I64)
    if not isinstance(text, str):
        raise sqlite3.DatabaseError("a column holds non-integer values")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return np.fromstring(text, dtype=I64, sep=",")
        except ValueError:  # text, a float, or a number beyond int64
            raise sqlite3.DatabaseError("a column holds non-integer values") from None


class Fetcher:
    """Reads integer columns of ``conn``'s tables; extra connections open ``uri`` (read-only).

    ``workers`` <= 1, or no ``uri``, reads every block on the calling thread.
    """

    def __init__(self, conn: sqlite3.Connection, uri: str = "", workers: int = 1,
                 text_factory: Callable[[bytes], str] | None = None, *,
                 setup: Callable[[sqlite3.Connection], None] | None = None) -> None:
        self.conn = conn
        self.uri = uri
        self.workers = workers if uri else 1
        self._text = text_factory
        self._setup = setup  # called on every extra connection (limits, text factory)
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._bg: list[Future[Any]] = []
        self._pending: dict[tuple[str, tuple[str, ...], str], Callable[[], list[np.ndarray]]] \
            = {}

    def close(self) -> None:
        for f in self._bg:  # let background jobs end before their connections close
            f.exception()
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for c in self._opened:
            c.close()
        self._opened.clear()

    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.uri, uri=True, check_same_thread=False)
        if self._text is not None:
            c.text_factory = self._text
        if self._setup is not None:
            self._setup(c)
        with self._lock:
            self._opened.append(c)
        return c

    def _thread_conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = self._local.conn = self._connect()
        return c

    def background(self, job: Callable[[sqlite3.Connection], T]) -> Callable[[], T]:
        """Start ``job(conn)`` on a thread with its own connection; returns its result getter.

        Serial fetchers run it at once on ``conn``.
        """
        if self.workers <= 1:
            res = job(self.conn)
            return lambda: res
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(job(self._connect()))
            except BaseException as exc:  # handed to the caller by fut.result()
                fut.set_exception(exc)

        threading.Thread(target=run, name="nsys-bg", daemon=True).start()
        self._bg.append(fut)
        return fut.result

    def prefetch(self, table: str, exprs: list[str], where: str = "") -> None:
        """Start reading a big table's blocks now; a later identical :meth:`fetch` gets them."""
        if self.workers > 1:
            key = (table, tuple(exprs), where)
            if key not in self._pending:
                self._pending[key] = self._start(table, exprs, where, None)

    def fetch(self, table: str, exprs: list[str], where: str = "", *,
              conn: sqlite3.Connection | None = None) -> list[np.ndarray]:
        """Columns ``exprs`` (never NULL) of ``table``'s rows matching ``where``, rowid order.

        With ``conn`` every query runs on that connection, on this thread (needed when
        ``exprs`` use TEMP tables of that connection).
        """
        pending = self._pending.pop((table, tuple(exprs), where), None) if conn is None \
            else None
        return (pending or self._start(table, exprs, where, conn))()

    def _start(self, table: str, exprs: list[str], where: str,
               conn: sqlite3.Connection | None) -> Callable[[], list[np.ndarray]]:
        """Plan the block queries; split tables go to the pool at once. Returns the getter."""
        serial = conn is not None
        conn = conn or self.conn
        # Two queries: SQLite answers a lone MIN or MAX of rowid from the b-tree, not a scan.
        lo = conn.execute(f"SELECT MIN(rowid) FROM {table}").fetchone()[0]
        hi = conn.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0]
        n = len(exprs)
        if lo is None or hi is None:
            return lambda: empty(n)
        span = int(hi) - int(lo) + 1
        split = not serial and self.workers > 1 and span >= PARALLEL_MIN_ROWS
        q = _Blocks.plan(conn, table, exprs, where, int(lo), span,
                         self.workers if split else 0)
        if not split:
            c = conn
            return lambda: q.gather([q.one(a, c) for a in q.blocks])
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="nsys-read")
        futs = [self._pool.submit(self._one_here, q, a) for a in q.blocks]
        return lambda: q.gather([f.result() for f in futs])

    def _one_here(self, q: _Blocks, a: int) -> list[np.ndarray] | int:
        """Block ``a`` of ``q`` on this (pool) thread's own connection."""
        return q.one(a, self._thread_conn())


@dataclass
class _Blocks:
    """One table's integer columns read in blocks of ``step`` rowids (``blocks``: their first
    rowids) over ``span`` rowids from ``lo``. ``base``: the first row's start, subtracted in
    SQL and added back (fewer digits, faster text: "start" relative to it, "end" as a
    duration), None: the columns as they are. ``dest``: a split table's columns, each block
    copied to its rowid offset (no concatenation; rows missing from the rowid range
    squeezed out at the end), None: blocks concatenated."""

    table: str
    query: str
    n: int
    lo: int
    span: int
    step: int
    blocks: list[int]
    base: int | None
    dest: list[np.ndarray] | None

    @classmethod
    def plan(cls, conn: sqlite3.Connection, table: str, exprs: list[str], where: str, lo: int,
             span: int, workers: int) -> _Blocks:
        """The blocks of ``table``'s rows ``where``; ``workers``: the threads a split table
        is read on (0: not split, read on the calling thread)."""
        base = conn.execute(f"SELECT start FROM {table} LIMIT 1").fetchone()[0] \
            if exprs[:2] == ["start", '"end"'] else None
        if not isinstance(base, int):  # NULL or a corrupt cell: no relative trick
            base = None
        n = len(exprs)
        if base is not None:
            exprs = [f"start - {int(base)}", '"end" - start', *exprs[2:]]
        sel = ", ".join(f"group_concat({e}, ',')" for e in exprs)
        cond = f" AND ({where})" if where else ""
        query = f"SELECT {sel} FROM {table} WHERE rowid BETWEEN ? AND ?{cond}"
        # Split: about four blocks per thread, so the threads end together.
        step = max(MIN_CHUNK_ROWS, min(CHUNK_ROWS, -(-span // (4 * workers)))) \
            if workers else CHUNK_ROWS
        dest = [np.empty(span, dtype=I64) for _ in range(n)] \
            if workers and not where and span <= MAX_DEST_ROWS else None
        return cls(table, query, n, lo, span, step, list(range(lo, lo + span, step)), base,
                   dest)

    def one(self, a: int, c: sqlite3.Connection) -> list[np.ndarray] | int:
        """The block from rowid ``a`` on ``c``: its columns, or (``dest``) its row count."""
        row = c.execute(self.query, (a, a + self.step - 1)).fetchone()
        cols = [_parse(x) for x in row]
        if len({x.size for x in cols}) != 1:
            raise sqlite3.DatabaseError(f"{self.table}: a column holds NULL or non-integer "
                                        "values")
        if self.dest is None:
            return cols
        off = a - self.lo
        for d, x in zip(self.dest, cols, strict=True):
            d[off:off + x.size] = x
        return cols[0].size

    def gather(self, parts: list[list[np.ndarray] | int]) -> list[np.ndarray]:
        """The blocks' parts (:meth:`one`'s, in block order) as whole columns."""
        dest = self.dest
        if dest is None:
            out = [np.concatenate([p[i] for p in parts if not isinstance(p, int)])
                   for i in range(self.n)]
        elif sum(int(p) for p in parts if isinstance(p, int)) == self.span:
            out = dest
        else:
            keep = np.concatenate([np.arange(a - self.lo, a - self.lo + int(k))
                                   for a, k in zip(self.blocks, parts, strict=True)
                                   if isinstance(k, int)])
            out = [d[keep] for d in dest]
        if self.base is not None:
            out[0] += int(self.base)
            out[1] += out[0]
        return out
