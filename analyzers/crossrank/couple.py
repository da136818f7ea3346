"""Edges between kernels matched across ranks (``matching``): one edge each way between every
two members of a matched group, in the members' order."""

from __future__ import annotations

Edge = tuple[int, int, int, int, int, int]  # pos, op, partner pos, partner op, rule, dir


def couple(members: list[tuple[int, int]], rule: int, edges: list[Edge]) -> None:
    """The edges of one group of (rank position, kernel) members."""
    for a, ka in members:
        for b, kb in members:
            if a != b:
                edges.append((a, ka, b, kb, rule, 0))


def couple_two(a: int, b: int, ka: list[int], kb: list[int], rule: int) -> list[Edge]:
    """:func:`couple`'s edges of the groups ``[(a, ka[k]), (b, kb[k])]``, k = 0, 1, ...: two
    ranks' k-th kernels matched in order, all at once."""
    return [x for i, j in zip(ka, kb, strict=True)
            for x in ((a, i, b, j, rule, 0), (b, j, a, i, rule, 0))]
