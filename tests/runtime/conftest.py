"""Fixtures shared by the runtime tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import profplug.steps as steps
from profplug.config import Config
from profplug.session.core import Session


@pytest.fixture
def session_for(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Session]]:
    """``make(tmp, **config)``: a rank Session listening to profplug.step (no RANK in the
    environment); every one made is detached and the step state reset afterwards."""
    made: list[Session] = []
    monkeypatch.delenv("RANK", raising=False)

    def make(tmp: Path, **kw: object) -> Session:
        steps._reset()
        s = Session(Config(out=str(tmp), **kw))  # type: ignore[arg-type]
        steps.add_listener(s.on_step_begin, s.on_step_end, s.on_switch)
        made.append(s)
        return s

    yield make
    for s in made:
        steps.remove_listener(s.on_step_begin, s.on_step_end, s.on_switch)
    steps._reset()


ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs"
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


@pytest.fixture(scope="session")
def megatron_ab(tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """(its directory, the finished process): ``profplug ab`` of a Megatron-Core job that never
    imports profplug (``jobs/mcore_decode.py`` on 2 gloo ranks under torchrun), 1 round of
    ``device`` and ``event``, steps 2..5 timed, the job printing the patches it sees.

    Started once and shared: each of its runs is ``profplug run --trace none --sync
    POLICY`` of the job (``runs/NN-POLICY-r0``), so test_run_steps asserts on its event run
    what such a run leaves, and test_ab on the A/B."""
    out = tmp_path_factory.mktemp("megatron_ab") / "ab"
    res = subprocess.run([sys.executable, "-m", "profplug", "ab", "-o", str(out), "--rounds",
                          "1", "--skip", "2", "--steps", "4", "--", TORCHRUN,
                          "--nproc-per-node", "2", str(JOBS / "mcore_decode.py"), "--tokens",
                          "8", "--show-patches"], capture_output=True, text=True, cwd=ROOT,
                         timeout=400)
    return out, res
