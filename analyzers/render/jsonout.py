"""JSON renderers: a result's ``to_dict()``, indented, no NaN (schemas: README, docs/).

A report or a comparison is its own document; a run-level result alone (``profplug whatif
-f json``) is ``{key: result}``, the same object it is under that key in the report.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import RunAnalysis


def _dump(doc: Any, out: TextIO) -> None:
    json.dump(doc, out, indent=1, allow_nan=False)
    out.write("\n")


def render_json(result: Any, out: TextIO) -> None:
    """A document with ``to_dict()``: a Report (schema v1), a Comparison."""
    _dump(result.to_dict(), out)


def render_run_json(result: RunAnalysis, out: TextIO) -> None:
    """A run-level result under its key, as in the report; its run's ``step`` (and
    ``predicted_step``) also at the top (``runstep``)."""
    d = result.to_dict()
    _dump({**{k: d[k] for k in ("step", "predicted_step") if k in d}, result.key: d}, out)
