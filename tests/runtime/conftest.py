"""Fixtures shared by the runtime tests."""

from __future__ import annotations

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
        s = Session(Config(out=str(tmp), **kw))
        steps.add_listener(s.on_step_begin, s.on_step_end, s.on_switch)
        made.append(s)
        return s

    yield make
    for s in made:
        steps.remove_listener(s.on_step_begin, s.on_step_end, s.on_switch)
    steps._reset()

