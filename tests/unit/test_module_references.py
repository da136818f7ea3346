"""Every reference to a module of the tree names one that exists, in the code (comments and
docstrings included), the docs and the rendered outputs (the goldens): the rules are
``tests/module_refs.py``'s; each is also run on planted references, to show that it can fail.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from module_refs import DATED, ROOT, Tree, former_names, problems

# these test modules plant modules of their own, in temporary folders, or name made-up ones
PLANTING = {"tests/unit/test_architecture.py", "tests/unit/test_module_references.py",
            "tests/unit/test_scheduling.py", "tests/unit/test_import_names.py",
            "tests/unit/test_tests_mirror_the_code.py"}


@cache
def _tree() -> Tree:
    tree = Tree.of(ROOT, {"profplug": "profplug", "analyzers": "profplug.analyzers"})
    tree.former = former_names(ROOT)
    return tree


def _texts() -> list[tuple[str, bool]]:
    """(relative path, is a rendered output) of every text checked: the code and pages of the
    checkout and the goldens; not the dated records of benchmarks/ (history keeps the names
    it had) nor the data files."""
    tree = _tree()
    out = []
    for rel in sorted(tree.files):
        if DATED.match(rel) or rel in PLANTING or "/data/" in rel or "whatif_grid_data" in rel:
            continue
        if rel.startswith("tests/golden/"):
            out.append((rel, True))
        elif rel.endswith((".py", ".md")):
            out.append((rel, False))
    return out


def test_every_module_reference_resolves() -> None:
    tree = _tree()
    wrong = [
        p
        for rel, outputs in _texts()
        for p in problems(tree, rel, (ROOT / rel).read_text(errors="replace"), outputs=outputs)
    ]
    assert not wrong, "references to modules that do not exist:\n" + "\n".join(wrong)


def _planted_tree(root: Path) -> Tree:
    """A checkout of three packages under ``analyzers``: ``graph`` (module ``pathgraph``: a
    class ``RankGraph`` with a field ``n``, a function ``partners``), ``whatif`` (module
    ``step_figures``) and ``crossrank``; ``longestpath`` was a module once."""
    (root / "analyzers" / "whatif").mkdir(parents=True)
    (root / "analyzers" / "whatif" / "step_figures.py").write_text("")
    for pkg in ("graph", "crossrank", "whatif"):
        (root / "analyzers" / pkg).mkdir(parents=True, exist_ok=True)
        (root / "analyzers" / pkg / "__init__.py").write_text("")
    (root / "analyzers" / "__init__.py").write_text("")
    (root / "analyzers" / "graph" / "pathgraph.py").write_text(
        "class RankGraph:\n    n: int\n\n\ndef partners() -> None: ...\n"
    )
    tree = Tree.of(root, {"analyzers": "profplug.analyzers"})
    tree.former = {"longestpath"}
    return tree


def _found(tree: Tree, rel: str, text: str, outputs: bool = False) -> list[str]:
    """What :func:`problems` reports of ``text`` as the file ``rel``, without the place."""
    return [p.split(": ", 1)[1] for p in problems(tree, rel, text, outputs=outputs)]


IMPORTS = "from profplug.analyzers.graph import pathgraph as pg\n"


def test_references_that_resolve_are_not_reported(tmp_path: Path) -> None:
    tree = _planted_tree(tmp_path)
    good = (
        "analyzers.graph.pathgraph.RankGraph.n, analyzers/graph/pathgraph.py, "
        "whatif/step_figures.py, analyzers/whatif/, profplug.sync.device (a range), report.json"
    )
    assert _found(tree, "page.md", good) == []
    assert _found(tree, "out.txt", good, outputs=True) == []
    code = (
        f'{IMPORTS}"""``graph.pathgraph.partners``, ``pathgraph.RankGraph``, '
        f'``pg.partners``, ``tl.x``, {good}"""\ntl = 1\n'
    )
    assert _found(tree, "m.py", code) == []


def test_planted_bad_references_are_reported(tmp_path: Path) -> None:
    tree = _planted_tree(tmp_path)
    everywhere = {
        "analyzers.graph.pathgraph.RankGraph.m": "analyzers.graph.pathgraph.RankGraph has no 'm'",
        "profplug.analyzers.graph.gone": "profplug.analyzers.graph has no 'gone'",
        "whatif/stepfigure.py": "no such file",
        "analyzers/crossrank/gone/": "no such file or folder",
    }
    code_and_docs = {
        "``longestpath.jump``": "a module's former name",
        "longestpath.py": "no such file",
    }
    code = {
        "``graph.pathgraph.nothing``": "graph.pathgraph has no 'nothing'",
        "``crossrank.pathgraph``": "crossrank has no 'pathgraph'",
        "``longestpath``": "a module's former name",
        "``pg.gone``": "profplug.analyzers.graph.pathgraph has no 'gone'",
    }
    where = {
        "out.txt": everywhere,
        "page.md": everywhere | code_and_docs,
        "m.py": everywhere | code_and_docs | code,
    }
    for rel, cases in where.items():
        for ref, why in cases.items():
            text = f'{IMPORTS}"""see {ref} here"""\n' if rel == "m.py" else f"see {ref} here"
            found = _found(tree, rel, text, outputs=rel == "out.txt")
            assert found == [f"{ref.strip('`')}: {why}"], (rel, ref, found)
