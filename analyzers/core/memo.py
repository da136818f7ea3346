"""A memo owned by whoever creates it: what one analysis computes several times over the
same objects (a timeline's launch calls, a symbol table's kinds, a run's NCCL matching, a
policy mask) is kept in a :class:`Memo` that the caller makes and passes to the functions
that take one (``memo=``), and goes when the caller lets the object go. Nothing is kept
between analyses unless their caller hands both the same Memo, and two analyses running at
once (in two threads) each have their own. Without a Memo those functions compute every
time."""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


class Memo:
    """Values by what they are (``kind``), of which objects (``of``, by identity), and of
    what else they depend on (``version``, e.g. a list's length). An entry holds its objects
    weakly where they allow it (a Timeline, an array), so a timeline that dies takes its
    entries with it; a list is held as long as the entry. Values are shared by every caller
    of :meth:`get`: read them, never change them. One Memo per analysis (or per caller who
    wants its analyses to share): it is not for sharing between threads."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[tuple[Any, ...], Any]] = {}
        self.made: Counter[str] = Counter()  # per kind: how many values were computed

    def get(self, kind: str, of: tuple[object, ...], make: Callable[[], T],
            version: Hashable = None) -> T:
        """The value of ``kind`` for the objects ``of``: kept, or ``make()`` kept now."""
        key = (kind, version, *map(id, of))
        got = self._entries.get(key)
        if got is not None and all(_held(r) is o for r, o in zip(got[0], of, strict=True)):
            value: T = got[1]
            return value
        value = make()
        self.made[kind] += 1
        self._entries[key] = (tuple(_hold(o, weakref.ref(self), key) for o in of), value)
        return value


def read_only(a: np.ndarray) -> np.ndarray:
    """``a``, made read-only: a value kept in a Memo is shared by every caller of it."""
    a.flags.writeable = False
    return a


def _hold(obj: object, memo: weakref.ref[Memo], key: Hashable) -> Any:
    """A weak reference to ``obj`` that drops the entry ``key`` when ``obj`` dies (the Memo
    itself held weakly: no cycle keeps it alive), or ``obj`` itself where it allows none."""

    def drop(_: object) -> None:
        owner = memo()
        if owner is not None:
            owner._entries.pop(key, None)

    try:
        return weakref.ref(obj, drop)
    except TypeError:  # a list, an int: held strongly
        return obj


def _held(ref: Any) -> object:
    return ref() if isinstance(ref, weakref.ref) else ref
