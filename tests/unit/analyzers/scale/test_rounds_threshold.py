"""The size from which a report with a what-if runs its run-level analyses in rounds where
the ranks are read (``scale.placement.min_bytes``): ``$PROFPLUG_ROUNDS_MIN_BYTES``, else
its deprecated former name ``$PROFPLUG_SPREAD_MIN_BYTES`` (noted once on stderr), else
500 MB; a value that is not a number is a one-line error naming the variable read."""

from __future__ import annotations

import pytest
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.scale import placement


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFPLUG_ROUNDS_MIN_BYTES", raising=False)
    monkeypatch.delenv("PROFPLUG_SPREAD_MIN_BYTES", raising=False)
    placement._note_former_name.cache_clear()


def test_without_either_variable_the_threshold_is_500_mb() -> None:
    assert placement.min_bytes() == 500_000_000


def test_the_rounds_variable_sets_the_threshold(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PROFPLUG_ROUNDS_MIN_BYTES", "123")
    assert placement.min_bytes() == 123
    assert capsys.readouterr().err == ""


def test_the_former_name_still_works_with_one_note(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PROFPLUG_SPREAD_MIN_BYTES", "0")
    assert placement.min_bytes() == 0
    assert placement.min_bytes() == 0
    assert capsys.readouterr().err == ("profplug: $PROFPLUG_SPREAD_MIN_BYTES is deprecated, "
                                       "set $PROFPLUG_ROUNDS_MIN_BYTES instead\n")


def test_the_new_name_wins_over_the_former_one(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PROFPLUG_ROUNDS_MIN_BYTES", "7")
    monkeypatch.setenv("PROFPLUG_SPREAD_MIN_BYTES", "9")
    assert placement.min_bytes() == 7
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", ["PROFPLUG_ROUNDS_MIN_BYTES", "PROFPLUG_SPREAD_MIN_BYTES"])
def test_a_value_that_is_not_a_number_names_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                        name: str) -> None:
    monkeypatch.setenv(name, "lots")
    with pytest.raises(ProfplugError, match=rf"^\${name}: not a number of bytes: 'lots'$"):
        placement.min_bytes()
