"""Names in an Nsight export: StringIds ids -> the file's one symbol table."""

from __future__ import annotations

import sqlite3

import numpy as np
from profplug.analyzers.core.timeline import SymbolTable
from profplug.analyzers.readers.nsys.source import quote_ident

DENSE_IDS = 1 << 26  # StringIds ids below this are mapped with a dense table


class _Symbols(SymbolTable):
    """One name table for the file: StringIds ids and literal strings -> symbol index."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__()
        self.conn = conn
        self.indexed = _id_indexed(conn)  # else one scan of StringIds per lookup, not per id
        self.dangling: set[int] = set()  # symbols of ids missing from StringIds

    def from_string_ids(self, ids: np.ndarray) -> np.ndarray:
        """StringIds ids -> symbol indices (unknown ids become ``<string id N>``)."""
        if ids.size == 0:
            return np.zeros(0, dtype=np.int32)
        lo, hi = int(ids.min()), int(ids.max())
        if lo >= 0 and hi < DENSE_IDS:  # dense lookup: O(n), no sort
            present = np.zeros(hi + 1, dtype=bool)
            present[ids] = True
            uids = np.nonzero(present)[0]
            dense = np.zeros(hi + 1, dtype=np.int32)
            dense[uids] = self._lookup(uids)
            named: np.ndarray = dense[ids]
            return named
        uids, inv = np.unique(ids, return_inverse=True)
        return self._lookup(uids)[inv]

    def _lookup(self, uids: np.ndarray) -> np.ndarray:
        values: dict[int, str] = {}
        u = [int(x) for x in uids]
        if not self.indexed:  # an IN (...) per 500 ids would scan the table each time
            want = set(u)
            values.update((int(i), str(v)) for i, v in
                          self.conn.execute("SELECT id, value FROM StringIds")
                          if isinstance(i, int) and i in want)
            u_rest: list[int] = []
        else:
            u_rest = u
        for k in range(0, len(u_rest), 500):
            chunk = u_rest[k:k + 500]
            q = f"SELECT id, value FROM StringIds WHERE id IN ({','.join('?' * len(chunk))})"
            values.update((int(i), str(v)) for i, v in self.conn.execute(q, chunk))
        out = np.array([self.sym(values.get(i, f"<string id {i}>")) for i in u],
                       dtype=np.int32)
        self.dangling.update(int(out[k]) for k, i in enumerate(u) if i not in values)
        return out


def _id_indexed(conn: sqlite3.Connection) -> bool:
    """Whether StringIds.id is its rowid or leads an index (an id lookup is then a seek)."""
    info = list(conn.execute("PRAGMA table_info(StringIds)"))
    if any(r[1] == "id" and r[5] == 1 and str(r[2]).upper() == "INTEGER" for r in info) \
            and sum(1 for r in info if r[5]) == 1:
        return True
    for idx in conn.execute("PRAGMA index_list(StringIds)"):
        cols = list(conn.execute(f"PRAGMA index_info({quote_ident(str(idx[1]))})"))
        if cols and cols[0][2] == "id":
            return True
    return False
