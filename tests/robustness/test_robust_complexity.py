"""Analysis loops stay O(n log n) on the patterns that made them quadratic (issue #18, item 4).

Checked by operation count, not time: every Python line the analyzer runs is counted
(``sys.settrace``) at n and 4n; a linear analysis grows ~4x, a quadratic one ~16x. Numpy
calls count as one line, so the bound is on Python-level loops, which is what regressed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from profplug.analyzers.core.timeline import Timeline, TimelineBuilder
from profplug.analyzers.stalls.rank import analyze_rank

ANALYZERS = str(Path(analyze_rank.__code__.co_filename).parent)
US = 1000


def python_lines(fn: Callable[[], Any]) -> int:
    """Lines executed inside analyzers/ while ``fn`` runs."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def glob(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(ANALYZERS) else None

    sys.settrace(glob)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def long_sync_and_short_syncs(n: int) -> Timeline:
    """One cudaStreamSynchronize on thread 2 spanning everything; n short ones on thread 1,
    each followed by a GPU gap that starts after it ended (covered only by the long one)."""
    b = TimelineBuilder()
    b.api(0, (20 * n + 100) * US, 2, "cudaStreamSynchronize", -1)
    for k in range(n):
        b.gpu(20 * k * US, (20 * k + 5) * US, 0, 7, 0, "k", -1)
        b.api((20 * k + 1) * US, (20 * k + 2) * US, 1, "cudaStreamSynchronize", -1)
    return b.build(rank=0, source="kineto", files=["synthetic"])


def deep_nest_then_calls(n: int) -> Timeline:
    """n nested annotations on one thread, closed before n sync calls on that thread."""
    b = TimelineBuilder()
    for k in range(n):
        b.ann(5 * k * US, (10 * n - 5 * k) * US, 1, f"level{k}")
    t0 = 10 * n + 10
    for k in range(n):
        b.api((t0 + 5 * k) * US, (t0 + 5 * k + 1) * US, 1, "cudaStreamSynchronize", -1)
        b.gpu((t0 + 5 * k) * US, (t0 + 5 * k + 2) * US, 0, 7, 0, "k", -1)
    return b.build(rank=0, source="kineto", files=["synthetic"])


def growth(make: Callable[[int], Timeline], n: int) -> float:
    small, big = make(n), make(4 * n)
    return python_lines(lambda: analyze_rank(big)) / python_lines(lambda: analyze_rank(small))


def test_gaps_covered_by_one_long_sync_are_matched_in_n_log_n() -> None:
    # given n gaps whose only enclosing call is one long sync that started before them all
    tl = long_sync_and_short_syncs(300)
    r = analyze_rank(tl)
    # then every gap is charged to that sync (the latest-starting call covering it)
    assert r.idle_by_cause_us()["event_sync"] == 300 * 15 - 15
    long_call = int(r.gaps.call[0])
    assert (r.gaps.call == long_call).all()
    # and the Python work grows linearly (a walk back per gap made this ~16x)
    assert growth(long_sync_and_short_syncs, 300) < 6


def test_call_sites_under_a_deep_nest_are_found_in_n_log_n() -> None:
    # given calls made after n nested ranges closed (a walk down the nest per call)
    r = analyze_rank(deep_nest_then_calls(300))
    assert [(c.callsite, c.count) for c in r.callsites] == [("unannotated", 300)]
    assert growth(deep_nest_then_calls, 300) < 6


def test_call_sites_inside_a_deep_nest_name_the_innermost_range() -> None:
    b = TimelineBuilder()
    n = 500
    for k in range(n):
        b.ann(k * US, (4 * n - k) * US, 1, "profplug.sync.device" if k == n - 1 else f"l{k}")
    b.api(n * US, (n + 1) * US, 1, "cudaDeviceSynchronize", -1)
    b.gpu(0, US, 0, 7, 0, "k", -1)
    r = analyze_rank(b.build(rank=0, source="kineto", files=["synthetic"]))
    assert [c.callsite for c in r.callsites] == [f"l{n - 2} > profplug.sync.device"]


def test_call_sites_of_many_threads_stay_on_their_thread() -> None:
    # given 200 threads, each with its own range around one sync, and a long range on thread
    # 0 that encloses every call in time (but not on their threads)
    b = TimelineBuilder()
    n = 200
    b.ann(0, (10 * n + 10) * US, 0, "outer")
    for k in range(1, n + 1):
        b.ann(10 * k * US, (10 * k + 5) * US, k, "profplug.sync.device")
        b.ann((10 * k - 1) * US, (10 * k + 6) * US, k, f"site{k % 3}")
        b.api((10 * k + 1) * US, (10 * k + 2) * US, k, "cudaDeviceSynchronize", -1)
        b.api((10 * k + 7) * US, (10 * k + 8) * US, k, "cudaDeviceSynchronize", -1)
    b.api(5 * US, 6 * US, 0, "cudaDeviceSynchronize", -1)
    b.gpu(0, US, 0, 7, 0, "k", -1)
    r = analyze_rank(b.build(rank=0, source="kineto", files=["synthetic"]))
    # then each call is named by its own thread's ranges (thread 0's by "outer")
    got = {c.callsite: c.count for c in r.callsites}
    assert got == {"site0 > profplug.sync.device": 66, "site1 > profplug.sync.device": 67,
                   "site2 > profplug.sync.device": 67, "unannotated": 200, "outer": 1}
