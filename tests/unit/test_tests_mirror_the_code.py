"""The tests mirror the code (docs/architecture.md, "A test"): a unit test module lives in the
folder of the package it tests (``tests/unit/analyzers/readers/kineto/`` for
``analyzers/readers/kineto/``, ``tests/unit/profplug/session/`` for ``profplug/session/``),
``tests/unit/`` itself holds only the checks over the whole project, the other kinds of test
(``integration``, ``runtime``, ``robustness``) have a folder each, and every folder of test
modules is a package, so two test modules may share a name."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("unit", "integration", "runtime", "robustness")
# tests/unit/'s own modules: each checks the whole project, not one package
PROJECT_CHECKS = frozenset({
    "test_architecture.py",
    "test_asserts_rewritten.py",
    "test_doc_links.py",
    "test_docs_recipes.py",
    "test_import_names.py",
    "test_lint.py",
    "test_module_references.py",
    "test_module_state.py",
    "test_scheduling.py",
    "test_setup_docs.py",
    "test_tests_mirror_the_code.py",
    "test_typecheck.py",
    "test_words_compared_as_types.py",
})
# a mirrored folder's package: tests/unit/analyzers/X -> analyzers/X, tests/unit/profplug/X ->
# profplug/X
# tests/unit/analyzers/ itself: the public API of profplug.analyzers (its names, the front object)
PUBLIC_API_TESTS = {"test_python_api.py", "test_public_api.py"}
MIRRORED = {"analyzers": "analyzers", "profplug": "profplug"}


def misplaced(root: Path) -> list[str]:
    """Each test module under ``root/tests`` that breaks the layout, with what is wrong."""
    tests = root / "tests"
    wrong = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        where = f"tests/{rel.as_posix()}"
        if len(rel.parts) == 1 or rel.parts[0] not in KINDS:
            wrong.append(f"{where}: not under tests/{{{','.join(KINDS)}}}/")
            continue
        missing = [d for d in path.parents if tests in d.parents and
                   not (d / "__init__.py").exists()]
        if missing:
            wrong.append(f"{where}: {missing[-1].relative_to(root).as_posix()}/ has no "
                         "__init__.py")
        if rel.parts[0] != "unit":
            continue
        if len(rel.parts) == 2:
            if rel.name not in PROJECT_CHECKS:
                wrong.append(f"{where}: tests/unit/ holds only checks over the whole project; "
                             "move it to the folder of the package it tests")
            continue
        code = MIRRORED.get(rel.parts[1])
        folder = root.joinpath(code, *rel.parts[2:-1]) if code else None
        if folder is None or not (folder / "__init__.py").exists():
            wrong.append(f"{where}: {Path(*rel.parts[1:-1]).as_posix()}/ is no package of "
                         "the code (tests/unit/analyzers/<package>/, tests/unit/profplug/...)")
        elif len(rel.parts) == 3 and code == "analyzers" and rel.name not in PUBLIC_API_TESTS:
            wrong.append(f"{where}: tests/unit/analyzers/ holds the public API's test only; "
                         "move it to the folder of the package it tests")
    return wrong


def test_every_test_module_sits_in_the_folder_of_what_it_tests() -> None:
    assert misplaced(ROOT) == []


def test_a_misplaced_test_module_is_named(tmp_path: Path) -> None:
    for package in ("analyzers", "analyzers/readers", "analyzers/readers/kineto",
                    "analyzers/stalls", "profplug", "profplug/cli"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    tests = tmp_path / "tests"
    good = ["unit/analyzers/readers/kineto/test_reader.py", "unit/analyzers/stalls/test_gaps.py",
            "unit/profplug/cli/test_flags.py", "unit/analyzers/test_python_api.py",
            "unit/test_architecture.py", "integration/test_gaps.py", "runtime/test_reader.py"]
    bad = ["unit/analyzers/test_flat.py", "unit/analyzers/nowhere/test_x.py",
           "unit/test_stalls.py", "test_top.py", "other/test_kind.py",
           "robustness/test_gaps.py"]
    for rel in good + bad:
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text("")
    for folder in {(tests / rel).parent for rel in good + bad[:-1]}:
        while folder != tests:
            (folder / "__init__.py").write_text("")
            folder = folder.parent
    found = misplaced(tmp_path)
    assert [line.split(":")[0] for line in found] == sorted(f"tests/{rel}" for rel in bad)
    assert "tests/robustness/test_gaps.py: tests/robustness/ has no __init__.py" in found
