"""The nesting column (``api_top``): given host calls nested on a thread, when a reader
builds the timeline, then each call points to its top-level ancestor, computed once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from profplug.analyzers.core.timeline import Timeline, top_level
from profplug.analyzers.readers.kineto.reader import read_kineto
from synth import KinetoTrace, api_is_top


def test_top_level_by_hand() -> None:
    # thread 1: A [0,100) holds B [10,50) which holds C [20,30); D [100,110) after A;
    # E [105,120) only overlaps D (starts inside, ends after): top-level.
    # thread 2: F [0,100) is top-level on its own thread although A encloses it in time.
    start = np.array([0, 10, 20, 100, 105, 0])
    end = np.array([100, 50, 30, 110, 120, 100])
    tid = np.array([1, 1, 1, 1, 1, 2])
    assert top_level(start, end, tid).tolist() == [0, 0, 0, 3, 4, 5]


def test_two_equal_ranges_are_one_nested_in_the_other() -> None:
    top = top_level(np.array([0, 0]), np.array([10, 10]), np.array([1, 1]))
    assert top.tolist() in ([0, 0], [1, 1])  # which one is the outer is not specified


def test_kineto_reader_fills_the_column(tmp_path: Path) -> None:
    t = KinetoTrace()
    t.runtime("cudaDeviceSynchronize", 10.0, 12.0)
    t.runtime("cuDeviceSynchronize", 11.0, 10.0, cat="cuda_driver")  # inside the runtime call
    t.runtime("cudaLaunchKernel", 30.0, 2.0)
    tl = read_kineto(t.write(tmp_path / "r0.json"))
    assert tl.api_top.size == tl.api_start_ns.size == 3
    outer = int(np.flatnonzero(tl.api_start_ns == tl.api_start_ns.min())[0])
    assert api_is_top(tl).sum() == 2
    inner = int(np.flatnonzero(~api_is_top(tl))[0])
    assert tl.api_top[inner] == outer


def test_hand_built_timeline_gets_it_on_first_use_and_save_load_keeps_it(tmp_path: Path
                                                                         ) -> None:
    tl = Timeline(rank=0, source="kineto", files=[],
                  api_start_ns=np.array([0, 5]), api_end_ns=np.array([10, 6]),
                  api_tid=np.array([1, 1]), api_name=np.array([0, 0], dtype=np.int32),
                  api_corr=np.array([1, 2]), names=["x"])
    assert tl.api_tops().tolist() == [0, 0]
    tl.save(tmp_path / "t.npz")
    assert Timeline.load(tmp_path / "t.npz").api_top.tolist() == [0, 0]
