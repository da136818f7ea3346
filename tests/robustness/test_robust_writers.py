"""Every file profplug writes goes through ``core/atomicfile.py`` (whole or not at all): no
other module of ``analyzers/`` or ``profplug/`` opens a file for writing, but for the few
listed in ``DIRECT`` with their reason. Checked on the source (every call of ``open``,
``os.fdopen``, ``gzip.open`` with a writing mode, ``.write_text``, ``.write_bytes``), and shown
failing on a planted writer."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNER = "analyzers/core/atomicfile.py"
DIRECT = {  # file -> why it may write directly
    "profplug/session/sitecustomize/sitecustomize.py":
        "the start-up failure record: profplug itself may be what failed to import",
    "profplug/session/launch.py": "the output folder's write probe, removed at once",
    "analyzers/readers/nsys/tmpfiles.py": "a scratch copy of an export in the temp folder",
}
WRITE_MODES = set("wax+")


def _mode(call: ast.Call, at: int) -> str:
    args = [*call.args[at:at + 1], *(k.value for k in call.keywords if k.arg == "mode")]
    return args[0].value if args and isinstance(args[0], ast.Constant) and isinstance(
        args[0].value, str) else ""


def writers(source: str) -> list[int]:
    """The lines of ``source`` that open a file for writing."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
            else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
            else ""
        if isinstance(f, ast.Attribute) and name in ("write_text", "write_bytes"):
            out.append(node.lineno)
        elif (name == "open" and owner in ("", "gzip", "io")) or (name == "fdopen"):
            if WRITE_MODES & set(_mode(node, 1)):
                out.append(node.lineno)
    return out


def test_only_the_atomic_writer_opens_files_for_writing() -> None:
    found = {}
    for folder in ("analyzers", "profplug"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            lines = writers(p.read_text())
            if lines and rel != OWNER and rel not in DIRECT:
                found[rel] = lines
            assert rel not in DIRECT or lines, f"{rel} writes nothing now: drop it from DIRECT"
    assert found == {}


def test_the_check_finds_a_planted_writer() -> None:
    planted = ('from pathlib import Path\nimport gzip, os\nPath("r.json").write_text("x")\n'
               'open("r.html", "w")\ngzip.open("t.gz", mode="wt")\nos.fdopen(3, "wb")\n'
               'open("r.json")\nopen("r.json", "rb")\n')
    assert writers(planted) == [3, 4, 5, 6]
