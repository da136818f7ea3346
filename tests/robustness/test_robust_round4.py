"""Issue #40 (robustness, round 4): trace oddities that gave wrong numbers with exit 0.

Nsight NVTX ranges range-checked as Kineto's events are (item 8); a Kineto GPU op whose
``device`` / ``stream`` is a string keeps its correlation (item 10).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nsys_synth import NsysExport
from profplug.analyzers.readers.nsys import ABSURD, OUT_OF_RANGE, read_nsys

I64_MAX = 2**63 - 1


def _nsys_steps(path: Path, bad: tuple[int, int] | None) -> Path:
    ex = NsysExport()
    p = ex.process()
    for k in range(4):
        p.annotation("profplug.step", 100.0 * k, 90.0)
        p.launch(100.0 * k + 1, 100.0 * k + 5, 50.0)
    if bad is not None:  # one more profplug.step range with raw ns times
        ex.rows["NVTX_EVENTS"].append(
            (bad[0], bad[1], 59, None, None, None, "profplug.step", (4242 << 24) | 1, None,
             None, 0, None, None, None, None, None, None, None, None))
    ex.write(path)
    return path


@pytest.mark.parametrize(("bad", "reason"), [
    ((50_000, I64_MAX), OUT_OF_RANGE),          # ends at 2^63-1
    ((-(2**63), I64_MAX), OUT_OF_RANGE),        # spans the whole int64 range
    ((0, 10 * 3600 * 10**9), ABSURD),           # a 10-hour range swallowing the others
    ((300_000, 100_000), ABSURD)])              # ends before it starts
def test_an_absurd_nvtx_step_is_skipped_and_counted_not_a_step(
        tmp_path: Path, bad: tuple[int, int], reason: str) -> None:
    (tl,) = read_nsys(_nsys_steps(tmp_path / "r.sqlite", bad), workers=1)
    durs = (tl.step_end_ns - tl.step_start_ns).tolist()
    assert durs == [90_000] * 4
    assert tl.skipped.get(reason) == 1


def test_sane_nvtx_steps_skip_nothing(tmp_path: Path) -> None:
    (tl,) = read_nsys(_nsys_steps(tmp_path / "r.sqlite", None), workers=1)
    assert len(tl.step_start_ns) == 4
    assert not tl.skipped.get(ABSURD) and not tl.skipped.get(OUT_OF_RANGE)
