"""How many CPUs the analyzer may use: the ones this process may run on (its affinity)."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may run on (at least 1): parsers, rank workers and reader threads."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
