"""Edges between kernels matched across ranks (``matching``): one edge each way between every
two members of a matched group, in the members' order, kept as numpy blocks (``Edges``: a
collective over N ranks has N x (N - 1) edges; 48 bytes each, not a Python tuple's ~230)."""

from __future__ import annotations

import numpy as np

Edge = tuple[int, int, int, int, int, int]  # pos, op, partner pos, partner op, rule, dir
_SMALL = 16  # members of a group coupled with Python tuples


class Edges:
    """Edges in the order they are added (single ones and blocks alike), as one
    ``(n, 6)`` int64 array at the end (:meth:`array`)."""

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []
        self._loose: list[Edge] = []

    def append(self, e: Edge) -> None:
        self._loose.append(e)

    def extend(self, es: list[Edge]) -> None:
        self._loose.extend(es)

    def block(self, rows: np.ndarray) -> None:
        """Rows ``(k, 6)`` after everything added so far."""
        self._flush()
        self._blocks.append(rows)

    def _flush(self) -> None:
        if self._loose:
            self._blocks.append(np.array(self._loose, dtype=np.int64).reshape(-1, 6))
            self._loose = []

    def array(self) -> np.ndarray:
        self._flush()
        if not self._blocks:
            return np.zeros((0, 6), dtype=np.int64)
        return np.concatenate(self._blocks) if len(self._blocks) > 1 else self._blocks[0]


def couple(members: list[tuple[int, int]], rule: int, edges: Edges) -> None:
    """The edges of one group of (rank position, kernel) members: for each member a, for
    each member b of another rank, (a, b), in the members' order."""
    n = len(members)
    if n <= _SMALL:  # a few members: tuples are cheaper than numpy's calls
        edges.extend([(a, ka, b, kb, rule, 0) for a, ka in members for b, kb in members
                      if a != b])
        return
    m = np.array(members, dtype=np.int64).reshape(-1, 2)
    i, j = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    keep = m[i, 0] != m[j, 0]
    i, j = i[keep], j[keep]
    rows = np.empty((i.size, 6), dtype=np.int64)
    rows[:, 0:2], rows[:, 2:4] = m[i], m[j]
    rows[:, 4], rows[:, 5] = rule, 0
    edges.block(rows)


def couple_two(a: int, b: int, ka: list[int], kb: list[int], rule: int) -> list[Edge]:
    """:func:`couple`'s edges of the groups ``[(a, ka[k]), (b, kb[k])]``, k = 0, 1, ...: two
    ranks' k-th kernels matched in order, all at once."""
    return [x for i, j in zip(ka, kb, strict=True)
            for x in ((a, i, b, j, rule, 0), (b, j, a, i, rule, 0))]
