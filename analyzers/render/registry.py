"""One registry of renderers, keyed by result type and format (table, json, csv, html).

A renderer is ``fn(result, out: TextIO) -> None``: it takes a result value, never argv, and
writes text. Adding one: a module with that function and one line in ``RENDERERS``. A
report's table and HTML page take in its run-level results (``Report.run``) through their
own renderers, so a new run-level analysis shows up in ``profplug report`` by registering
its table and HTML renderers here.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TextIO

from profplug.analyzers.ab.result import AbResult
from profplug.analyzers.compare.ab_runs import AbComparison
from profplug.analyzers.compare.reports import Comparison
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.crossrank.result import CrossRankResult
from profplug.analyzers.render import (
    ab_html,
    ab_table,
    against_table,
    compare_table,
    compareab_html,
    compareab_table,
    crossrank_html,
    crossrank_table,
    csvout,
    hostonly_render,
    html,
    jsonout,
    table,
    whatif_html,
    whatif_table,
)
from profplug.analyzers.render.escape import e
from profplug.analyzers.render.text import PrintableWriter
from profplug.analyzers.report.analysis import Report, RunAnalysis
from profplug.analyzers.stalls.hostonly import HostOnlyResult
from profplug.analyzers.whatif.against import AgainstResult, WhatIfAgainst
from profplug.analyzers.whatif.result import WhatIfResult

Renderer = Callable[[Any, TextIO], None]
PAGE = "html"  # written with --html, not chosen with --format
# Run-level results whose page section goes right after the summary, in this order (the
# others follow the notes): the what-if holds the answer, then the cross-rank bubbles.
TOP_SECTIONS = (HostOnlyResult.key, WhatIfResult.key, AgainstResult.key, CrossRankResult.key)


def _report_table(rep: Report, out: TextIO) -> None:
    table.render_table(rep, out)
    for result in rep.run.values():
        if isinstance(result, WhatIfResult):  # its finding is the report's headline
            out.write("\n")
            whatif_table.render_whatif_table(result, out, lead=False)
        elif renderer_for(type(result), "table") is not None:
            out.write("\n")
            render(result, "table", out)


def _report_page(rep: Report, out: TextIO) -> None:
    results = list(rep.run.values())
    top = sorted((a for a in results if a.key in TOP_SECTIONS),
                 key=lambda a: TOP_SECTIONS.index(a.key))
    html.render_html(rep, out, top=[_section(a) for a in top],
                     sections=[_section(a) for a in results if a.key not in TOP_SECTIONS])


def _compare_page(cmp: Comparison, out: TextIO) -> None:
    # each run's own sections (what-if, cross-rank), collapsed: the page leads with the
    # answer and stays short
    sections = [f'<details class="run" data-run="{e(label)}"><summary>run <b>{e(label)}</b>: '
                f"{e(', '.join(a.key for a in rep.run.values()))}</summary>"
                + "".join(_section(a) for a in rep.run.values()) + "</details>"
                for label, rep in ((cmp.label_a, cmp.report_a), (cmp.label_b, cmp.report_b))
                if rep.run]
    html.render_html(cmp.report_a, out, compare=cmp, sections=sections)


def _compareab_page(cmp: AbComparison, out: TextIO) -> None:
    compareab_html.render_compareab_html(
        cmp, out, top=[_section(a) for a in cmp.report_a.run.values()])


RENDERERS: Mapping[tuple[type, str], Renderer] = MappingProxyType({
    (Report, "table"): _report_table,
    (Report, "json"): jsonout.render_json,
    (Report, "csv"): csvout.render_csv,
    (Report, "html"): _report_page,
    (Comparison, "table"): compare_table.render_compare_table,
    (Comparison, "json"): jsonout.render_json,
    (Comparison, "html"): _compare_page,
    (AbComparison, "table"): compareab_table.render_compareab_table,
    (AbComparison, "json"): jsonout.render_json,
    (AbComparison, "html"): _compareab_page,
    (WhatIfResult, "table"): whatif_table.render_whatif_table,
    (WhatIfResult, "json"): jsonout.render_run_json,
    (WhatIfResult, "html"): whatif_html.render_whatif_html,
    (WhatIfAgainst, "table"): against_table.render_whatif_against_table,
    (WhatIfAgainst, "json"): jsonout.render_json,
    (AgainstResult, "table"): against_table.render_against_table,
    (AgainstResult, "json"): jsonout.render_run_json,
    (AgainstResult, "html"): whatif_html.render_against_html,
    (AbResult, "table"): ab_table.render_ab_table,
    (AbResult, "json"): jsonout.render_json,
    (AbResult, "html"): ab_html.render_ab_html,
    (CrossRankResult, "table"): crossrank_table.render_crossrank_table,
    (CrossRankResult, "json"): jsonout.render_run_json,
    (CrossRankResult, "html"): crossrank_html.render_crossrank_html,
    (HostOnlyResult, "table"): hostonly_render.render_hostonly_table,
    (HostOnlyResult, "json"): jsonout.render_run_json,
    (HostOnlyResult, "html"): hostonly_render.render_hostonly_html,
})


def renderer_for(result_type: type, fmt: str) -> Renderer | None:
    """The renderer of ``fmt`` for ``result_type`` (or the nearest base class), or None."""
    for t in result_type.__mro__:
        fn = RENDERERS.get((t, fmt))
        if fn is not None:
            return fn
    return None


def formats(result_type: type) -> list[str]:
    """The ``--format`` choices of a result type, in registry order (the page is not one)."""
    found = [f for t in result_type.__mro__ for (rt, f) in RENDERERS if rt is t and f != PAGE]
    return list(dict.fromkeys(found))


def check_format(result_type: type, fmt: str) -> None:
    """Raise a one-line ProfplugError unless ``fmt`` is a ``--format`` of ``result_type``."""
    if fmt not in formats(result_type):
        raise ProfplugError(f"unknown format {fmt!r} (choose from "
                            f"{', '.join(formats(result_type))})")


def render(result: object, fmt: str, out: TextIO) -> None:
    """Write ``result`` in format ``fmt`` (``check_format`` first for user-given formats)."""
    fn = renderer_for(type(result), fmt)
    if fn is None:
        raise ProfplugError(f"no {fmt} renderer for {type(result).__name__}")
    if fmt == "table":  # trace strings on a terminal: control characters shown escaped
        out = PrintableWriter(out)  # type: ignore[assignment]  # renderers only write()
    fn(result, out)


def render_text(result: object, fmt: str) -> str:
    buf = io.StringIO()
    render(result, fmt, buf)
    return buf.getvalue()


def _section(result: RunAnalysis) -> str:
    """A run-level result's HTML section: its own renderer's, else its JSON, escaped."""
    if renderer_for(type(result), PAGE) is not None:
        return render_text(result, PAGE)
    return html.json_section(result.key, result.to_dict())
