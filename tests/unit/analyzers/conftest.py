"""Fixtures shared by the analyzer tests: a 4-stage synthetic run and the files the
readers really parse."""

from __future__ import annotations

from pathlib import Path

import pytest
from profplug.analyzers.readers import registry
from synth.pipeline import PipelineSpec, write


@pytest.fixture
def run4(tmp_path: Path) -> list[Path]:
    files, _ = write(PipelineSpec(stages=4, steps=3), tmp_path / "traces")
    return files


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the readers really parsed (in this process: jobs=1)."""
    seen: list[str] = []
    for cls in (registry.KinetoReader, registry.NsysReader):
        real = cls.read

        def counting(self, path, index, options, real=real):
            seen.append(path.name)
            return real(self, path, index, options)

        monkeypatch.setattr(cls, "read", counting)
    return seen
