"""The default report of timelines, as ``profplug report`` makes it (what-if when cheap, then
the cross-rank analysis where it applies), rendered in every format: for the fuzz tests."""

from __future__ import annotations

from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.render.registry import render_text
from profplug.analyzers.report.analysis import Report, analyze_timelines
from profplug.analyzers.report.registry import report_analyses
from profplug.analyzers.stalls.sanity import sum_rule_broken

FORMATS = ("table", "json", "csv", "html")


def default_report(timelines: list[Timeline]) -> Report:
    """The report, rendered in every format; its sum rule holds and no optional analysis
    failed (a failed one is isolated as a warning line ``<analysis> failed (...)``)."""
    rep = analyze_timelines(timelines, run=report_analyses(None))
    for r in rep.ranks:
        assert sum_rule_broken(r) is None
    for fmt in FORMATS:
        assert render_text(rep, fmt)
    failed = [w for w in rep.warnings if " failed (" in w]
    assert failed == [], failed
    return rep
