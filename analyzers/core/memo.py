"""A memo that exists only within a ``with`` block: what one report computes several times
over the same objects (a timeline's launch calls, a symbol table's kinds, a run's NCCL
matching, a policy mask) is kept while the report runs and let go when it ends, so that a
long-lived process (a notebook, a Dask worker) keeps nothing of a report it finished."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class ScopedMemo(Generic[T]):
    """``store`` is None outside every ``with memo.kept():`` and one store (``factory()``)
    within; a nested ``kept()`` shares the outer one."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self.store: T | None = None

    @contextmanager
    def kept(self) -> Iterator[None]:
        outer = self.store
        self.store = self._factory() if outer is None else outer
        try:
            yield
        finally:
            self.store = outer
