"""Work stays bounded on the inputs made to blow it up: analysis loops stay O(n log n) on the
patterns that made them quadratic, the per-device work is linear in the devices, a long
label is one string for all its calls, wrapping a megabyte word is linear, and a
catastrophic step-range regex runs under a budget (or in RE2).

Checked by operation count, not time: every Python line the analyzer runs is counted
(``sys.settrace``) at n and 4n; a linear analysis grows ~4x, a quadratic one ~16x. Numpy
calls count as one line, so the bound is on Python-level loops, which is what regressed;
the per-device work counts the array elements its ufuncs read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest
from profplug.analyzers.core import saferegex
from profplug.analyzers.core.timeline import Timeline, TimelineBuilder
from profplug.analyzers.crossrank import cross_rank
from profplug.analyzers.stalls.callsites import enclosing
from profplug.analyzers.stalls.rank import analyze_rank
from synth import KinetoTrace, one_error

from profplug.cli.main import main

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


def test_a_long_annotation_label_is_one_string_for_all_its_calls() -> None:
    b = TimelineBuilder()
    name = "x" * 100_000
    b.ann(0, 1000 * US, 1, name)
    for k in range(50):
        b.api((10 * k + 1) * US, (10 * k + 2) * US, 1, "cudaDeviceSynchronize", -1)
    tl = b.build(rank=0, source="kineto", files=["synthetic"])
    labels = enclosing(tl, tl.api_start_ns, tl.api_end_ns, tl.api_tid)
    assert labels[0] == name and all(x is labels[0] for x in labels)


class _Counted(np.ndarray):
    """An array that counts the elements every ufunc on it (or on slices of it) reads."""

    seen = 0

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Any:
        _Counted.seen += sum(x.size for x in inputs if isinstance(x, np.ndarray))
        plain = [x.view(np.ndarray) if isinstance(x, _Counted) else x for x in inputs]
        return getattr(ufunc, method)(*plain, **kw)


def _devices_work(n: int) -> int:
    b = TimelineBuilder()
    for k in range(n):  # each kernel on its own device
        b.gpu(10 * k * US, (10 * k + 5) * US, k, 7, 0, "k", -1)
        b.api((10 * k + 5) * US, (10 * k + 9) * US, 1, "cudaDeviceSynchronize", -1)
    tl = b.build(rank=0, source="kineto", files=["synthetic"])
    tl.gpu_device = tl.gpu_device.view(_Counted)
    _Counted.seen = 0
    r = analyze_rank(tl)
    assert len(r.devices) == n
    cross_rank([tl])
    return _Counted.seen


def test_work_per_device_is_linear_in_the_devices() -> None:
    # a mask per device read n elements n times (160k devices: killed at 120 s)
    small, big = _devices_work(200), _devices_work(800)
    assert big <= 5 * small, (small, big)


def test_wrapping_a_long_word_is_textwraps_result() -> None:
    import textwrap

    from profplug.analyzers.render.text import wrap

    for text in ("a b " + "x" * 1000 + " c dd", "hello " + "y" * 300 + " tail end" * 9,
                 "z" * 257, "short text only"):
        for kw in ({}, {"initial_indent": "warning: ", "subsequent_indent": "  "}):
            assert wrap(text, 80, **kw) == textwrap.wrap(text, 80, **kw)
    lines = wrap("x" * (1 << 20), 80)  # textwrap: quadratic in the word
    assert len(lines) == (1 << 20) // 80 + 1 and "".join(lines) == "x" * (1 << 20)


def test_a_catastrophic_step_range_regex_is_bounded(tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    t = KinetoTrace(rank=0)
    t.annotation("a" * 34 + "b", 0, 100)
    t.launch(1, 2, 5)
    p = t.write(tmp_path / "rank0.json")
    # without RE2: Python's re in a child process under a budget, and a line saying so
    monkeypatch.setattr(saferegex, "_re2", None)
    monkeypatch.setattr(saferegex, "BUDGET_S", 1.0)
    monkeypatch.setattr(saferegex.search_all, "__defaults__", (1.0, saferegex._scan_re))
    assert main(["report", str(p), "--step-range", "re:(a+)+$", "--jobs", "1"]) == 2
    assert "took over 1 s (catastrophic backtracking?)" in one_error(capsys)
    # a regex that ends: the same steps with or without the budget
    assert saferegex.search_all(r"a{3}(b)", ["aaab", "ab"]) == [(0, "b")]


@pytest.mark.skipif(saferegex._re2 is None, reason="google-re2 not installed")
def test_with_re2_a_catastrophic_regex_is_linear() -> None:
    assert saferegex.search_all("(a+)+$", ["a" * 5000 + "b", "aa"]) == [(1, "aa")]
    names = ["decode_step 12", "step 3", "prefill", "decode_step x"]
    rx = r"decode_step (\d+)|step (\d+)"
    assert saferegex.search_all(rx, names) == saferegex._scan_re(rx, names)
