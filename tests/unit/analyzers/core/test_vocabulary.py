"""The closed sets of words (``analyzers/core/vocabulary.py``): a member is its word in every
output (text, f-strings, JSON by json and msgspec, CSV), a dict key either way, the same
member after a process hop or a cache round trip; a word from outside becomes a member once,
or a one-line error naming the choices."""

from __future__ import annotations

import ast
import csv
import io
import json
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from profplug.analyzers.core.vocabulary import (
    Basis,
    Format,
    StepTiming,
    SyncKind,
    SyncPolicy,
    TraceKind,
    WindowMode,
    Word,
)

from profplug.config import Config, sync_policy

ALL = [m for e in (SyncPolicy, SyncKind, TraceKind, WindowMode, StepTiming, Basis, Format)
       for m in e]


@pytest.mark.parametrize("member", ALL, ids=lambda m: f"{type(m).__name__}.{m.name}")
def test_a_member_is_written_as_its_word_alone(member: Word) -> None:
    word = member.value
    assert (str(member), f"{member}", f"[{member:>12}]", "%s" % member) == (  # noqa: UP031
        word, word, f"[{word:>12}]", word)
    assert json.dumps({"k": member, member: 1}) == json.dumps({"k": word, word: 1})
    assert msgspec.json.encode({"k": member}) == msgspec.json.encode({"k": word})
    buf = io.StringIO()
    csv.writer(buf).writerow([member])
    assert buf.getvalue().strip() == word
    assert ", ".join([member, word]) == f"{word}, {word}"
    assert f"{member!r}" == repr(word)  # an error message quoting it


def test_a_member_and_its_word_are_one_dict_key_and_compare_equal() -> None:
    counts = {SyncPolicy.DEVICE: 1}
    assert counts["device"] == 1 and {"step": 2}[Basis.STEP] == 2
    assert SyncPolicy.DEVICE == "device" and "window" == Basis.WINDOW
    assert Basis.STEP != "window" and Format.TABLE in ("table", "json")


@dataclass
class _Held:
    basis: Basis
    kind: SyncKind


def test_a_member_survives_a_process_hop_and_a_typed_decode() -> None:
    # given a result holding members, when it is pickled (a worker) or JSON-decoded with
    # its type (the result cache), then the members come back, not plain strings
    assert pickle.loads(pickle.dumps(TraceKind.NSYS)) is TraceKind.NSYS
    held = msgspec.json.decode(msgspec.json.encode(_Held(Basis.WINDOW, SyncKind.EVENT)),
                               type=_Held)
    assert held.basis is Basis.WINDOW and held.kind is SyncKind.EVENT
    with pytest.raises(msgspec.ValidationError):  # a word of no set: a cache miss, no guess
        msgspec.json.decode(b'{"basis": "steps", "kind": "event"}', type=_Held)


def test_a_word_from_outside_is_parsed_once_or_refused_on_one_line() -> None:
    assert TraceKind.parse("nsys", "--trace") is TraceKind.NSYS
    with pytest.raises(ValueError) as err:
        TraceKind.parse("perfetto", "PROFPLUG_TRACE")
    assert str(err.value) == "PROFPLUG_TRACE must be one of kineto, nsys, none, got 'perfetto'"
    with pytest.raises(KeyError):  # the caller's own error type
        Format.parse("xml", "--format", KeyError)


def test_the_runtime_config_holds_members_and_writes_words() -> None:
    # given the environment a rank reads, then its config holds the trace kind's member,
    # and the environment it hands on holds the word
    config = Config.from_env({"PROFPLUG_OUT": "/tmp/x", "PROFPLUG_TRACE": "NSYS"})
    assert config.trace is TraceKind.NSYS and config.to_env()["PROFPLUG_TRACE"] == "nsys"
    assert Config(out=None, trace="none").trace is TraceKind.NONE
    assert sync_policy("keep") is SyncPolicy.DEVICE
    assert sync_policy(None, {"PROFPLUG_SYNC": "event"}) is SyncPolicy.EVENT
    with pytest.raises(ValueError, match="PROFPLUG_TRACE must be one of kineto, nsys, none"):
        Config.from_env({"PROFPLUG_TRACE": "perfetto"})


def test_a_bad_word_on_the_command_line_is_one_line_and_runs_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from profplug.cli.main import main

    code = main(["run", "-o", str(tmp_path / "d"), "--trace", "perfetto", "--", "python3",
                 "-c", "1"])
    assert code == 2 and not (tmp_path / "d").exists()
    assert capsys.readouterr().err.strip().splitlines() == [
        "profplug: error: --trace must be one of kineto, nsys, none, got 'perfetto'"]


def test_the_runtime_reads_the_words_without_the_analyzer() -> None:
    # given a fresh process importing the runtime's config and policy switch (every rank
    # does), then of the analyzer only core loads (the vocabulary): no numpy, pandas, msgspec
    code = ("import sys, profplug.config, profplug.policy\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'pandas', 'msgspec', 'torch') or m.startswith('profplug.analyzers.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = ast.literal_eval(out)
    assert "profplug.analyzers.core.vocabulary" in loaded
    assert all(m.startswith("profplug.analyzers.core") for m in loaded), loaded
