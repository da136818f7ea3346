"""Give the heap's free memory back to the operating system (glibc's ``malloc_trim``).

A reader frees most of what it allocates (its blocks, its decoded events, the packed parts
of each column once they are joined), but glibc keeps freed heap memory mapped: the holes
left between live allocations count in the process's resident set until reused. A worker's
peak is the read's high-water mark plus the analysis' temporaries, so the reader and
``dispatch.run_task`` call :func:`trim` where a phase ends, and the next phase starts from
the memory that is really live (what it saves: ``benchmarks/2026-12-03/README.md``). A no-op
where the C library has no ``malloc_trim`` (macOS, musl).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the C library this process runs on
    except (OSError, AttributeError):  # no such symbol (musl)
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def trim() -> None:
    """Return the heap's free pages to the OS (a few milliseconds); no-op where unsupported."""
    fn = _malloc_trim()
    if fn is not None:
        fn(0)


# events (API calls + GPU ops) from which a run-level analysis trims between its phases:
# a trim costs about the same whatever is freed, and what a phase frees grows with its
# events, so below this the trim costs more than it gives back (a small run's whole
# analysis is short)
TRIM_EVENTS = 200_000


def trim_large(n_events: int) -> None:
    """:func:`trim` after a phase of a run-level analysis over ``n_events`` events, when they
    are ``TRIM_EVENTS`` or more."""
    if n_events >= TRIM_EVENTS:
        trim()
