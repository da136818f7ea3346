"""``examples/decode_loop.py --switch``: one traced process running both policies (the
same-process what-if check, ``benchmarks/grid_switch.py``), on the CPU: torchrun + gloo."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.scale.load import load_timelines

ROOT = Path(__file__).resolve().parents[2]
DECODE = str(ROOT / "examples" / "decode_loop.py")
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def _steps(run: Path, name: str) -> dict[int, int]:
    tls = load_timelines([run], jobs=1, progress=False,
                         read=ReadOptions().with_step_range(name))
    return {t.rank: int(t.step_start_ns.size) for t in tls}


def test_switch_splits_the_window_into_two_named_halves(tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "profplug", "run", "-o", str(out), "--sync", "device",
         "--skip", "2", "--steps", "8", "--no-report", "--", TORCHRUN, "--nproc-per-node", "2",
         DECODE, "--hidden", "64", "--layers", "2", "--batch", "2", "--steps", "14",
         "--switch", "6:event"], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "sync=event" in p.stdout  # the policy in force at the end
    # steps 2-5 ran under device, 6-9 under event: 4 + 4 of the 8 traced, on both ranks
    assert _steps(out, "decode.device") == {0: 4, 1: 4}
    assert _steps(out, "decode.event") == {0: 4, 1: 4}


def test_bad_switch_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    # the example's own parser, in this process (a process of its own would import torch
    # only to print the usage error)
    spec = importlib.util.spec_from_file_location("decode_loop", DECODE)
    assert spec is not None and spec.loader is not None
    decode_loop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(decode_loop)
    with pytest.raises(SystemExit) as exit_:
        decode_loop.parse_args(["--switch", "6:fast"])
    assert exit_.value.code == 2 and "--switch: STEP:POLICY" in capsys.readouterr().err
