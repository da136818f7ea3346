"""The one place trace strings are escaped for the HTML page.

Trace strings (kernel and annotation names, call sites, file paths, run.json values) reach a
page two ways: as HTML text or attributes, through :func:`e`; inside the page's JSON
``<script>``, through :func:`script_json`. The page's script puts strings from that JSON on
screen only as text (``textContent``, canvas ``fillText``), never as HTML.
"""

from __future__ import annotations

import html
import json
from typing import Any


def e(s: object) -> str:
    """HTML-escape any value (quotes too: safe in attributes)."""
    return html.escape(str(s), quote=True)


def script_json(doc: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and U+2028/9 escaped."""
    s = json.dumps(doc, allow_nan=False, separators=(",", ":"))
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def num_cell(v: float | int | None, fmt: str = ",.1f") -> str:
    """A table cell holding the exact value in ``data-v`` (the page sorts by it) and a
    rounded display."""
    if v is None:
        return '<td data-v="">-</td>'
    return f'<td data-v="{json.dumps(v)}">{format(v, fmt)}</td>'
