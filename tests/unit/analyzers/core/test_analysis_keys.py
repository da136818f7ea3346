"""Nothing outside an analysis's own package names it by its key string: the report, the
placement, the rounds, the renderers and the commands read a result's ``key`` (``WhatIfResult.key``)
or the spec, so that adding or renaming an analysis is its own module and a registry line."""

from __future__ import annotations

import ast
from pathlib import Path

from parsed_source import parsed

ROOT = Path(__file__).resolve().parents[4] / "analyzers"


def _keys() -> dict[str, str]:
    """Every analysis result's key (``key: ClassVar[str] = "..."``) -> its package."""
    out = {}
    for f in ROOT.rglob("*.py"):
        for node in ast.walk(parsed(f)):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == "key"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                out[node.value.value] = f.relative_to(ROOT).parts[0]
    return out


def _run_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "run"


def _named(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, string) of each string used as a run-level result's key: ``x.run.get("k")``,
    ``x.run["k"]``, ``"k" in x.run``, ``AnalysisSpec(name="k")``."""
    out = []
    for node in ast.walk(tree):
        found: list[ast.expr] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and _run_attr(node.func.value):
                found += node.args[:1]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "AnalysisSpec":
            found += [k.value for k in node.keywords if k.arg in ("name", "cache_key")]
        if isinstance(node, ast.Subscript) and _run_attr(node.value):
            found.append(node.slice)
        if isinstance(node, ast.Compare) and any(_run_attr(c) for c in node.comparators):
            found.append(node.left)
        out += [
            (x.lineno, x.value)
            for x in found
            if isinstance(x, ast.Constant) and isinstance(x.value, str)
        ]
    return out


def test_the_check_sees_each_way_of_naming_an_analysis_by_its_key() -> None:
    planted = ast.parse(
        'a = rep.run.get("k")\nb = rep.run["k"]\nc = "k" in rep.run\n'
        'd = AnalysisSpec(name="k", label="x", run=f)\n'
    )
    assert [line for line, _ in _named(planted)] == [1, 2, 3, 4]


def test_no_module_names_another_packages_analysis_by_its_key() -> None:
    keys = _keys()
    assert {"whatif", "cross_rank", "host_only"} <= set(keys)
    bad = []
    for f in ROOT.rglob("*.py"):
        package = f.relative_to(ROOT).parts[0]
        for line, text in _named(parsed(f)):
            if text in keys and keys[text] != package:
                bad.append(
                    f"analyzers/{f.relative_to(ROOT)}:{line}: {text!r} (the key of an "
                    f"analysis in analyzers/{keys[text]}/): use its result's `key`"
                )
    assert not bad, "an analysis named by its key string outside its package:\n" + "\n".join(bad)
