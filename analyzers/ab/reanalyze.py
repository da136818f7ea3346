"""An ``ab.json`` analyzed again with today's code, nothing run and nothing written: its
recorded runs through today's statistics, verdicts and output check, and its what-if
recomputed from its traced run when that is at hand (``overlay.restored``). What
``ab-report`` prints, and what a shipped ``ab.json`` must equal (``scripts/refresh_shipped.py``
writes it; ``tests/integration/test_shipped_numbers.py`` checks it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profplug.analyzers.ab.analyze import analyze_ab
from profplug.analyzers.ab.overlay import attach, restored
from profplug.analyzers.ab.result import AbResult

DERIVED = ("median_step_us", "host_median_step_us")  # per run: recomputed from its series


def reanalyze(doc: dict[str, Any], base: Path | None = None) -> AbResult:
    """The A/B of ``doc`` (a validated ``ab.json``, in the folder ``base``) with today's
    code."""
    interrupted = doc.get("interrupted_status")
    if doc.get("interrupted") and not interrupted:  # ab.json before interrupted_status
        interrupted = doc.get("exit_status") if doc.get("exit_status") in (130, 143) else 130
    runs = [{k: v for k, v in r.items() if k not in DERIVED} for r in doc["runs"]]
    rounds = int(doc.get("rounds") or 1 + max((int(r["round"]) for r in doc["runs"]),
                                              default=0))
    res = analyze_ab(runs, policies=list(doc["policies"]), rounds=rounds,
                     order=doc.get("order") or "interleaved", seed=doc.get("seed"),
                     skip=doc.get("skip"), steps=doc.get("steps"),
                     command=list(doc.get("command") or []), interrupted=interrupted or None,
                     stopped=doc.get("stopped"))
    res.unknown = dict(doc)
    if doc.get("whatif") is not None:
        attach(res, restored(res, doc["whatif"], base))
    return res
