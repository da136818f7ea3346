"""The last index up to i whose value is at least x", for many queries at once.

Behind two lookups of the analysis: the latest-starting sync call that still runs when a gap
starts (``callmatch.SortedCalls``) and the innermost annotations that enclose a call
(``callsites.enclosing``). Walking back one item at a time is O(n) per query, O(n^2) in all
when one long call or a deep nest of ranges sits behind every query; here a max segment
tree is climbed and descended for every query together with numpy: O((n + q) log n), and a
constant number of Python steps per tree level.
"""

from __future__ import annotations

import numpy as np

I64 = np.int64
_MIN = np.iinfo(I64).min


def last_at_least(values: np.ndarray, upto: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per query q: the largest k <= upto[q] with values[k] >= x[q], else -1.

    ``upto`` may be -1 (no candidate) or beyond the end (clipped); int64 throughout.
    """
    n = int(values.size)
    upto = np.asarray(upto, dtype=I64)
    x = np.asarray(x, dtype=I64)
    out = np.full(upto.size, -1, dtype=I64)
    if n == 0 or upto.size == 0:
        return out
    size = 1 << max(n - 1, 0).bit_length()
    levels = size.bit_length() - 1
    tree = np.full(2 * size, _MIN, dtype=I64)  # tree[1] = root; tree[size + k] = values[k]
    tree[size:size + n] = values
    for h in range(levels):  # bottom-up: each internal node holds its children's max
        lo = size >> (h + 1)
        tree[lo:2 * lo] = np.maximum(tree[2 * lo:4 * lo:2], tree[2 * lo + 1:4 * lo:2])
    ok = upto >= 0
    node = np.where(ok, np.minimum(upto, n - 1) + size, 1)
    found = ok & (tree[node] >= x)
    active = ok & ~found
    for _ in range(levels):  # up: the nearest subtree to the left with max >= x
        if not active.any():
            break
        hit = active & (node > 1) & ((node & 1) == 1) & (tree[node - 1] >= x)  # a right child's sibling
        node = np.where(hit, node - 1, np.where(active, node >> 1, node))
        found |= hit
        active &= ~hit & (node > 1)
    for _ in range(levels):  # down: its rightmost leaf with value >= x
        inner = found & (node < size)
        if not inner.any():
            break
        right = 2 * node + 1
        node = np.where(inner, np.where(tree[np.minimum(right, 2 * size - 1)] >= x, right,
                                        2 * node), node)
    out[found] = node[found] - size
    return out
