"""Bad events (bad UTF-8, huge integers, out-of-range numbers) are skipped and counted."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from profplug.analyzers.readers.kineto.reader import read_kineto
from synth import mixed_trace

Mutation = Callable[[bytes], bytes]

# mixed_trace() has 4 kernels, 6 runtime calls; each mutation breaks exactly one kernel.
BAD_KERNEL: dict[str, tuple[Mutation, str]] = {
    "bad UTF-8 in a name": (lambda s: s.replace(b'"gemm_kernel"', b'"gemm_\xff\xfekernel"', 1),
                            "bad UTF-8 in name"),
    "ts a huge integer": (lambda s: s.replace(b'"ts": 16,', b'"ts": ' + b"9" * 40 + b",", 1),
                          "timestamp out of range"),
    "ts 1e400": (lambda s: s.replace(b'"ts": 16,', b'"ts": 1e400,', 1),
                 "timestamp out of range"),
    "ts negative huge": (lambda s: s.replace(b'"ts": 16,', b'"ts": -1e30,', 1),
                         "timestamp out of range"),
    "ts beyond int64 ns": (lambda s: s.replace(b'"ts": 16,', b'"ts": 1e16,', 1),
                           "timestamp out of range"),
    "dur a huge integer": (lambda s: s.replace(b'"dur": 4,', b'"dur": ' + b"9" * 40 + b",", 1),
                           "negative or absurd duration"),
    "dur 1e400": (lambda s: s.replace(b'"dur": 4,', b'"dur": 1e400,', 1),
                  "negative or absurd duration"),
    "dur 5000 digits": (lambda s: s.replace(b'"dur": 4,', b'"dur": 1' + b"0" * 5000 + b",", 1),
                        "negative or absurd duration"),
}


def seed() -> bytes:
    return json.dumps(mixed_trace().to_dict(), indent=1).encode()


@pytest.mark.parametrize("case", sorted(BAD_KERNEL))
def test_one_bad_kernel_is_skipped_and_counted(tmp_path: Path, case: str) -> None:
    mutate, reason = BAD_KERNEL[case]
    data = mutate(seed())
    assert data != seed()
    p = tmp_path / "rank0.json"
    p.write_bytes(data)
    tl = read_kineto(p)
    assert tl.skipped == {reason: 1}
    assert (tl.n_gpu, tl.api_start_ns.size) == (3, 6)  # everything else is kept
    assert tl.warnings == []  # not mistaken for a truncated file; header (base) still read
    assert tl.api_start_ns.min() == mixed_trace().to_dict()["baseTimeNanoseconds"]


def test_counts_are_in_the_table_and_json(tmp_path: Path) -> None:
    data = seed()
    for mutate, _ in (BAD_KERNEL["bad UTF-8 in a name"], BAD_KERNEL["ts 1e400"]):
        data = mutate(data)
    p = tmp_path / "rank0.json"
    p.write_bytes(data)
    run = [sys.executable, "-m", "profplug", "report", str(p)]
    table = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "skipped events: timestamp out of range: 1, bad UTF-8 in name: 1" in table.stdout
    js = subprocess.run([*run, "--format", "json"], capture_output=True, text=True, timeout=60)
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["ranks"][0]["skipped"] == {"bad UTF-8 in name": 1,
                                                            "timestamp out of range": 1}
    strict = subprocess.run([*run, "--strict"], capture_output=True, text=True, timeout=60)
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
