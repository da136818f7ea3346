"""How deep a decoded JSON value nests, found without recursion.

A ``run.json`` or ``ab.json`` nested a few hundred levels deep decodes fine but makes every
recursive walker after it (the page's metadata tables, the JSON writer) raise RecursionError;
such a file is caught here, once, with a plain loop.
"""

from __future__ import annotations

from typing import Any


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (dicts and lists) nests more than ``limit`` levels deep."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, dict | list):
            if depth >= limit:
                return True
            todo.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False
