"""JSON renderer: the stable ``version: 1`` schema (see README, "JSON report")."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..report import Report


def render_json(rep: Report, out: TextIO, extra: dict[str, Any] | None = None) -> None:
    doc = rep.to_dict()
    if extra:
        doc.update(extra)
    json.dump(doc, out, indent=1, allow_nan=False)
    out.write("\n")
