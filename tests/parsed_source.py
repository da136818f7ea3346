"""Source files parsed once per test process: the static checks (the architecture, module
state, import names and analysis keys tests) each walk the same few hundred files."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path


def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed again only when the file changed (size or mtime). The
    tree is shared: read it, never change it."""
    st = path.stat()
    return _parse(str(path), st.st_mtime_ns, st.st_size)


@cache
def _parse(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(), path)
