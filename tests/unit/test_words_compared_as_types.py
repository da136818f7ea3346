"""Code compares the closed sets of words (``analyzers/core/vocabulary.py``: sync policies,
sync kinds, trace kinds, window modes, step timings, bases, output formats; and
``compare.noise.Series``) as types, never as bare string literals: no ``basis == "step"``,
``trace != "none"`` or ``fmt in ("table", "json")`` in profplug/ or analyzers/. The check is
also run on planted comparisons, to show that it can fail, and on the forms it must let
pass.
"""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

from profplug.analyzers.compare.noise import Series
from profplug.analyzers.core import vocabulary

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("profplug", "analyzers")
# the names (a variable, an attribute, a dict key) that hold one of the vocabulary's words
NAMES = frozenset(
    {
        "basis",
        "trace",
        "source",
        "mode",
        "clock",
        "timing",
        "step_timing",
        "fmt",
        "kind",
        "policy",
        "sync",
    }
)
WORDS = frozenset(
    m.value
    for e in (
        vocabulary.SyncPolicy,
        vocabulary.SyncKind,
        vocabulary.TraceKind,
        vocabulary.WindowMode,
        vocabulary.StepTiming,
        vocabulary.Basis,
        vocabulary.Format,
        Series,
    )
    for m in e
)


def _name(node: ast.expr) -> str | None:
    """``basis``, ``r.basis``, ``step["basis"]``, ``getattr(r, "basis", ...)`` -> basis."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
        func = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        at = {"get": 0, "getattr": 1}.get(func, len(node.args))
        key = node.args[at] if at < len(node.args) else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _words(node: ast.expr) -> list[str]:
    """The vocabulary's words written as literals in ``node`` (a str, or a tuple/list/set
    of them)."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [
        i.value
        for i in items
        if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in WORDS
    ]


def bare_words(source: str, where: str) -> list[str]:
    """``where:line name op "word"`` per comparison of a watched name against a literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for a, b in pairwise(sides):
            for named, literal in ((a, b), (b, a)):
                name = _name(named)
                if name in NAMES and _words(literal):
                    found.append(f"{where}:{node.lineno} {name} vs {_words(literal)[0]!r}")
    return found


def test_no_word_of_the_vocabulary_is_compared_as_a_bare_string() -> None:
    found = []
    for folder in CHECKED:
        for f in sorted((ROOT / folder).rglob("*.py")):
            found += bare_words(f.read_text(), str(f.relative_to(ROOT)))
    assert found == []


def test_the_check_finds_planted_comparisons() -> None:
    planted = (
        'if r.basis == "step": pass\n'
        'ok = trace != "none"\n'
        'if fmt not in ("table", "json"): pass\n'
        'x = step["basis"] == sb["basis"] == "step"\n'
        'y = getattr(r, "basis", "") == "window"\n'
        'z = w.get("mode") == "run"\n'
        'if options.get("trace", TraceKind.KINETO) != "none": pass\n'
        'if "device" == s.kind: pass\n'
    )
    assert bare_words(planted, "m.py") == [
        "m.py:1 basis vs 'step'",
        "m.py:2 trace vs 'none'",
        "m.py:3 fmt vs 'table'",
        "m.py:4 basis vs 'step'",
        "m.py:5 basis vs 'window'",
        "m.py:6 mode vs 'run'",
        "m.py:7 trace vs 'none'",
        "m.py:8 kind vs 'device'",
    ]


def test_the_check_lets_members_and_other_words_pass() -> None:
    allowed = (
        "if r.basis == Basis.STEP: pass\n"
        "if fmt not in (Format.TABLE, Format.JSON): pass\n"
        "if kind == COMM_COLL: pass\n"
        'if kind.decode() == "none": pass\n'  # not a watched name: a call's result
        'if name == "step": pass\n'
    )  # not a watched name
    assert bare_words(allowed, "m.py") == []
