"""Renderers: take analysis results (never argv) and write text, JSON, CSV or HTML."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ..report import Report


def _table(rep: Report, out: TextIO) -> None:
    from .table import render_table

    render_table(rep, out)


def _json(rep: Report, out: TextIO) -> None:
    from .jsonout import render_json

    render_json(rep, out)


def _csv(rep: Report, out: TextIO) -> None:
    from .csvout import render_csv

    render_csv(rep, out)


RENDERERS: dict[str, Callable[[Report, TextIO], None]] = {
    "table": _table, "json": _json, "csv": _csv,
}
EXTENSIONS = {".txt": "table", ".json": "json", ".csv": "csv"}
